// Package group is the classic consumer-group coordinator of the Kafka
// listener: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the group
// fencing check of OffsetCommit and TxnOffsetCommit (KIP-447). It follows
// Apache Kafka's classic protocol (GroupMetadataManager and ClassicGroup in
// the group-coordinator module); where it departs, the comment at that spot
// says so and why.
//
// # States
//
//	             join by a first member
//	+-------+ -------------------------> +--------------------+
//	| Empty |                            | PreparingRebalance | <-----------------+
//	+-------+ <------------------------- +--------------------+                   |
//	    |      join phase ends with no      |                                     |
//	    |      members                      | every known member rejoined,        |
//	    | DeleteGroup                       | or the rebalance timeout passed     |
//	    v                                   v                                     |
//	+------+                    +---------------------+                           |
//	| Dead |                    | CompletingRebalance | --------------------------+
//	+------+                    +---------------------+                           |
//	(forgotten)                             |            a new member joins,      |
//	                                        | leader's   a member rejoins with    |
//	                                        | SyncGroup  new metadata, the        |
//	                                        v            leader rejoins, one      |
//	                                   +--------+        leaves, expires or       |
//	                                   | Stable | ------  does not sync  ---------+
//	                                   +--------+
//
// Each completed join phase adds one to the generation, including one that
// ends with no members (the group becomes Empty at the new generation).
//
//   - JoinGroup parks until the join phase completes. Members that have not
//     rejoined by the rebalance timeout (the largest among the members) are
//     removed, static members excepted: they stay until their session or the
//     sync timer removes them. The leader (the earliest-joined member that
//     rejoined) gets the member list with each member's metadata for the
//     selected protocol; the others get an empty list. The protocol is
//     Kafka's vote: among those every member lists, each member votes for
//     its first, and the most votes win.
//   - From JoinGroup v4 a member without an id first gets MEMBER_ID_REQUIRED
//     with its id (clientID-uuid; see WithClientID), and is pending until it
//     rejoins with it or its session timeout passes.
//   - Static members (v5+ instance id) keep their membership across client
//     restarts: a join with the instance id and no member id replaces the
//     member id, fences the old one (FENCED_INSTANCE_ID) and, in a Stable
//     group with unchanged protocols, hands back the current generation
//     without a rebalance (KIP-345, KIP-814 at v9).
//   - SyncGroup from the leader stores the assignment and answers every
//     member; followers park until it does. Members that got a JoinGroup
//     response but do not sync within the rebalance timeout are removed.
//   - Every request from a member refreshes its session; a member whose
//     session expires is removed and the group rebalances. A member with a
//     parked JoinGroup or SyncGroup does not expire (its client is waiting
//     on us).
//   - Heartbeat answers REBALANCE_IN_PROGRESS while PreparingRebalance, so
//     members rejoin.
//   - InitialRebalanceDelay holds the first join phase of an Empty group
//     open for more members, extended per new member up to the rebalance
//     timeout, as Kafka's group.initial.rebalance.delay.ms.
//
// # What is not here
//
//   - Persistence. Membership is in memory: after a restart every client
//     rejoins (its member id is unknown), and generations start again at 1.
//     Fencing still holds, since a stale member's id is unknown to the new
//     coordinator. Committed offsets live in the engine
//     (engine.CommitOffsets), which keeps them across restarts.
//   - Empty groups with offsets in the engine are kept, with their
//     generation, until DeleteGroup (Kafka keeps them until their offsets
//     expire); ForgetEmptyGroups, run by the listener's maintenance tick,
//     removes those without offsets, as Kafka's periodic cleanup does.
//   - group.max.size (GROUP_MAX_SIZE_REACHED), KIP-848 consumer groups,
//     share and streams groups. (ListGroups and DescribeGroups are served
//     from List and DescribeGroup.)
//
// # Concurrency
//
// Each group has its own mutex, held for the bookkeeping of one request or
// one timer and never while a call waits: a parked JoinGroup or SyncGroup
// waits on a channel the group answers it on. A parked call returns when
// the phase completes, its timeout passes, or its context is done. The
// Kafka listener reads no request of a connection while one is parked, so,
// as in Kafka ("sockets are muted while the JoinGroup is in purgatory"), a
// client that disconnects meanwhile is noticed only then; its context is
// done when the server closes.
// Timers are time.AfterFunc callbacks that take the group's mutex and check
// that what they were armed for still holds.
package group
