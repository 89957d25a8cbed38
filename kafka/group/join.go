package group

import (
	"bytes"
	"context"
	"time"

	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinReq is a JoinGroup request reduced to what the group keeps: fields
// the request's version does not carry are cleared, and byte slices are
// copied out of the caller's read buffer.
type joinReq struct {
	req          *kmsg.JoinGroupRequest
	clientID     string
	clientHost   string
	instanceID   *string
	session      time.Duration
	rebalance    time.Duration
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol
}

func newJoinReq(ctx context.Context, req *kmsg.JoinGroupRequest) *joinReq {
	jr := &joinReq{
		req:          req,
		clientID:     clientIDFrom(ctx),
		clientHost:   clientHostFrom(ctx),
		protocolType: req.ProtocolType,
		session:      time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		rebalance:    time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
	}
	if req.Version >= 5 && req.InstanceID != nil {
		id := *req.InstanceID
		jr.instanceID = &id
	}
	// v0 has no rebalance timeout: Kafka uses the session timeout. A
	// non-positive one would end every join phase at once; take the
	// session timeout for it too.
	if req.Version < 1 || jr.rebalance <= 0 {
		jr.rebalance = jr.session
	}
	// Kafka keys the protocols by name; a repeated name counts once, or a
	// member could outvote the others alone.
	seen := make(map[string]bool, len(req.Protocols))
	for _, p := range req.Protocols {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		jr.protocols = append(jr.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	return jr
}

// JoinGroup handles JoinGroup v0-9 (Kafka's classicGroupJoin). It parks
// until the join phase completes, the rebalance timeout passes, ctx is done
// (the listener is closing) or the coordinator closes; the last two answer
// COORDINATOR_NOT_AVAILABLE, and a new member whose join is abandoned that
// way is removed again. The client id for generated member ids comes from
// WithClientID.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(memberID string, err error) *kmsg.JoinGroupResponse {
		resp.MemberID = memberID
		resp.ErrorCode = errcode.Code(err)
		return resp
	}
	if c.isClosed() {
		return fail(req.MemberID, ErrCoordinatorNotAvailable)
	}
	if req.Group == "" {
		return fail(req.MemberID, ErrInvalidGroupID)
	}
	jr := newJoinReq(ctx, req)
	if jr.session < c.opts.MinSessionTimeout || jr.session > c.opts.MaxSessionTimeout {
		return fail(req.MemberID, ErrInvalidSessionTimeout)
	}
	jr.rebalance = min(jr.rebalance, c.opts.MaxRebalanceTimeout)
	// A group is created only by a join that can succeed on it, so a
	// rejected first join leaves nothing behind.
	create := req.MemberID == "" && jr.protocolType != "" && len(jr.protocols) > 0
	g := c.locked(req.Group, create)
	if g == nil {
		switch {
		case c.isClosed():
			return fail(req.MemberID, ErrCoordinatorNotAvailable)
		case req.MemberID != "":
			return fail(req.MemberID, ErrUnknownMemberID)
		}
		return fail("", ErrInconsistentGroupProtocol)
	}
	if c.isClosed() {
		g.mu.Unlock()
		return fail(req.MemberID, ErrCoordinatorNotAvailable)
	}
	call := g.join(jr, resp)
	g.mu.Unlock()
	if call == nil {
		return resp
	}
	return c.awaitJoin(ctx, g, call)
}

// join runs a JoinGroup under the group's lock. It returns nil when resp
// is the answer, else the parked call.
func (g *group) join(jr *joinReq, resp *kmsg.JoinGroupResponse) *joinCall {
	id := jr.req.MemberID
	fail := func(err error) *joinCall {
		resp.MemberID = id
		resp.ErrorCode = errcode.Code(err)
		return nil
	}
	if !g.supports(jr.protocolType, jr.protocols) {
		return fail(ErrInconsistentGroupProtocol)
	}
	if id == "" {
		newID := newMemberID(jr.clientID, jr.instanceID)
		if jr.instanceID != nil {
			if old := g.members[g.static[*jr.instanceID]]; old != nil {
				return g.replaceStatic(old, newID, jr)
			}
			// A static member is identified by its instance id: it
			// skips the MEMBER_ID_REQUIRED round.
			return g.addMember(newID, jr)
		}
		if jr.req.Version >= 4 {
			// The client gets its id before it is a member, so a
			// join it abandons (request timeout, disconnect) cannot
			// leave an anonymous member behind.
			g.addPending(newID, jr.session)
			g.c.log.Debug("member id required", "group", g.name, "member", newID)
			resp.MemberID = newID
			resp.ErrorCode = codeMemberIDRequired
			return nil
		}
		return g.addMember(newID, jr)
	}
	if _, ok := g.pending[id]; ok {
		if jr.instanceID != nil {
			// Kafka treats this as impossible (IllegalStateException):
			// pending ids are only handed to dynamic members.
			return fail(ErrInvalidRequest)
		}
		g.removePending(id)
		return g.addMember(id, jr)
	}
	m, err := g.validateMember(id, jr.instanceID)
	if err != nil {
		return fail(err)
	}
	switch g.state {
	case statePreparingRebalance:
		return g.rejoin(m, jr, "member rejoined")
	case stateCompletingRebalance:
		if sameProtocols(m.protocols, jr.protocols) {
			// A retry of a join whose response was lost: answer it
			// again rather than start over.
			g.touch(m)
			g.fillJoin(resp, m, m.id == g.leader)
			return nil
		}
		return g.rejoin(m, jr, "member metadata changed")
	case stateStable:
		// The leader's rejoin always rebalances: it is how a client
		// asks for a new assignment when something outside the member
		// metadata changed (topic partitions).
		if m.id != g.leader && sameProtocols(m.protocols, jr.protocols) {
			g.touch(m)
			g.fillJoin(resp, m, false)
			return nil
		}
		reason := "member metadata changed"
		if m.id == g.leader {
			reason = "leader rejoined"
		}
		return g.rejoin(m, jr, reason)
	}
	return fail(ErrUnknownMemberID)
}

func (g *group) addMember(id string, jr *joinReq) *joinCall {
	m := &member{
		id:               id,
		instanceID:       jr.instanceID,
		clientID:         jr.clientID,
		clientHost:       jr.clientHost,
		protocolType:     jr.protocolType,
		protocols:        jr.protocols,
		sessionTimeout:   jr.session,
		rebalanceTimeout: jr.rebalance,
		isNew:            true,
		seq:              g.nextSeq(),
	}
	if g.state == statePreparingRebalance && g.prevState == stateEmpty {
		g.newMemberAdded = true
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = id
	}
	g.members[id] = m
	g.incSupported(m)
	call := g.park(m, jr.req)
	g.touch(m)
	g.c.log.Info("member joined", "group", g.name, "member", id, "instance", jr.instanceID, "state", g.state)
	g.maybePrepareRebalanceOrCompleteJoin("member added")
	return call
}

// rejoin takes a known member's new metadata and timeouts and parks its
// JoinGroup for the next join phase.
func (g *group) rejoin(m *member, jr *joinReq, reason string) *joinCall {
	g.update(m, jr)
	call := g.park(m, jr.req)
	g.touch(m)
	g.maybePrepareRebalanceOrCompleteJoin(reason)
	return call
}

func (g *group) update(m *member, jr *joinReq) {
	g.decSupported(m)
	m.protocols = jr.protocols
	g.incSupported(m)
	m.sessionTimeout = jr.session
	m.rebalanceTimeout = jr.rebalance
}

// park registers a JoinGroup call for m. A call m already had parked is
// answered REBALANCE_IN_PROGRESS: its client resent the join on another
// connection, and only the newest one is listened to.
func (g *group) park(m *member, req *kmsg.JoinGroupRequest) *joinCall {
	g.answerJoin(m, func(r *kmsg.JoinGroupResponse) {
		r.MemberID = m.id
		r.ErrorCode = codeRebalanceInProgress
	})
	call := &joinCall{m: m, req: req, ch: make(chan *kmsg.JoinGroupResponse, 1)}
	m.join = call
	g.awaitingJoin++
	return call
}

// replaceStatic is KIP-345's static member replacement: a JoinGroup with an
// instance id and no member id takes over the instance's membership under a
// new member id. The old id is fenced (its parked calls, heartbeats,
// syncs and commits get FENCED_INSTANCE_ID). In a Stable group, a
// replacement with the same protocols gets the current generation and
// keeps the old assignment without a rebalance, so a restarted static
// consumer does not move partitions.
func (g *group) replaceStatic(old *member, newID string, jr *joinReq) *joinCall {
	prevLeader := g.leader
	g.answerJoin(old, func(r *kmsg.JoinGroupResponse) {
		r.MemberID = old.id
		r.ErrorCode = codeFencedInstanceID
	})
	g.answerSync(old, codeFencedInstanceID)
	if old.timer != nil {
		old.timer.Stop()
	}
	delete(g.members, old.id)
	m := &member{
		id:               newID,
		instanceID:       old.instanceID,
		clientID:         jr.clientID,
		clientHost:       jr.clientHost,
		protocolType:     old.protocolType,
		protocols:        old.protocols,
		sessionTimeout:   old.sessionTimeout,
		rebalanceTimeout: old.rebalanceTimeout,
		assignment:       old.assignment,
		isNew:            old.isNew,
		seq:              old.seq,
	}
	g.members[newID] = m
	g.static[*m.instanceID] = newID
	if g.leader == old.id {
		g.leader = newID
	}
	if _, ok := g.pendingSync[old.id]; ok {
		delete(g.pendingSync, old.id)
		g.pendingSync[newID] = struct{}{}
	}
	g.c.log.Info("static member replaced", "group", g.name, "instance", *m.instanceID, "old", old.id, "new", newID, "state", g.state)
	unchanged := sameProtocols(old.protocols, jr.protocols)
	g.update(m, jr)
	call := g.park(m, jr.req)
	g.touch(m)
	switch g.state {
	case stateStable:
		// Kafka skips the rebalance whenever the selected protocol
		// would not change; this requires the member's protocols and
		// metadata to be unchanged too (a changed subscription
		// rebalances), which costs at most an extra rebalance.
		if unchanged {
			g.answerJoin(m, func(r *kmsg.JoinGroupResponse) {
				if r.Version >= 9 {
					// KIP-814: a static leader gets the members but
					// must not reassign, as the others keep theirs.
					leader := m.id == g.leader
					g.fillJoin(r, m, leader)
					r.SkipAssignment = leader
					return
				}
				// Before v9 a leader cannot be told to skip the
				// assignment; Kafka names the previous leader so that
				// the member acts as a follower.
				g.fillJoin(r, m, false)
				r.LeaderID = prevLeader
			})
			return call
		}
		g.prepareRebalance("static member rejoined with new metadata")
	case stateCompletingRebalance:
		// The leader may already be assigning to the old member id.
		g.prepareRebalance("static member replaced during sync")
	case statePreparingRebalance:
		g.maybeCompleteJoinPhase()
	}
	return call
}

func (c *Coordinator) awaitJoin(ctx context.Context, g *group, call *joinCall) *kmsg.JoinGroupResponse {
	select {
	case r := <-call.ch:
		return r
	case <-ctx.Done():
	case <-c.closed:
	}
	g.mu.Lock()
	select {
	case r := <-call.ch: // answered while we were leaving
		g.mu.Unlock()
		return r
	default:
	}
	if !c.isClosed() && !g.dead {
		g.abandonJoin(call)
	}
	g.mu.Unlock()
	resp := call.req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID = call.m.id
	resp.ErrorCode = codeCoordinatorNotAvailable
	return resp
}

// abandonJoin detaches a JoinGroup whose caller is gone. A known member
// stays: its client may retry with its id, and if it does not, the join
// phase drops it at the rebalance timeout. A new member is removed at once
// instead of holding the rebalance that long: below v4 its client never
// learnt its id, and a v4+ client retrying with it gets UNKNOWN_MEMBER_ID
// and joins afresh.
func (g *group) abandonJoin(call *joinCall) {
	m := call.m
	if m.join != call {
		return
	}
	m.join = nil
	g.awaitingJoin--
	if g.members[m.id] != m || !m.isNew {
		return
	}
	g.c.log.Info("new member abandoned its join", "group", g.name, "member", m.id)
	g.removeMember(m)
	g.afterRemoval()
}
