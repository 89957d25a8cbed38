package group

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Options configures a Coordinator. Zero values take the defaults.
type Options struct {
	// Logger receives membership changes and rebalances; nil discards.
	Logger *slog.Logger
	// MinSessionTimeout and MaxSessionTimeout bound a JoinGroup's session
	// timeout (Kafka's group.min.session.timeout.ms and
	// group.max.session.timeout.ms); defaults 6s and 30m. Min must not
	// exceed Max, or every join fails with INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxRebalanceTimeout caps a member's rebalance timeout, the longest
	// a join phase waits for the members to rejoin (and a JoinGroup
	// parks): a client's 2^31-1 ms would hold the group and every parked
	// join for 24.8 days. Default 30 minutes, as MaxSessionTimeout's.
	MaxRebalanceTimeout time.Duration
	// InitialRebalanceDelay holds the first rebalance of an Empty group
	// open for more members (group.initial.rebalance.delay.ms, 3s in
	// Kafka). Default 0: a single node has no cluster start-up to wait
	// out, and tests want the first generation at once.
	InitialRebalanceDelay time.Duration
}

const (
	defaultMinSessionTimeout = 6 * time.Second
	defaultMaxSessionTimeout = 30 * time.Minute
)

// Coordinator is the classic group coordinator of one node: it holds every
// group's membership in memory and runs Kafka's join/sync rebalance
// protocol. Its methods are safe for concurrent use.
type Coordinator struct {
	opts Options
	log  *slog.Logger

	// closed is closed by Close: parked calls select on it, and every
	// section under a group's lock checks it first, so no timer is armed
	// after Close has stopped that group's timers.
	closed    chan struct{}
	closeOnce sync.Once

	// mu guards the map only. It is never held together with a group's
	// lock except in DeleteGroup, which takes it inside one; nothing takes
	// a group's lock inside mu, so that order cannot deadlock.
	mu     sync.Mutex
	groups map[string]*group
}

// New returns a coordinator with no groups.
func New(opts Options) *Coordinator {
	if opts.MinSessionTimeout <= 0 {
		opts.MinSessionTimeout = defaultMinSessionTimeout
	}
	if opts.MaxSessionTimeout <= 0 {
		opts.MaxSessionTimeout = defaultMaxSessionTimeout
	}
	if opts.MaxRebalanceTimeout <= 0 {
		opts.MaxRebalanceTimeout = defaultMaxSessionTimeout
	}
	if opts.InitialRebalanceDelay < 0 {
		opts.InitialRebalanceDelay = 0
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{
		opts:   opts,
		log:    log,
		closed: make(chan struct{}),
		groups: make(map[string]*group),
	}
}

// Close stops every timer and makes every parked JoinGroup and SyncGroup
// return COORDINATOR_NOT_AVAILABLE; later calls get the same. Group state is
// left as it was: it is not persisted, and a closed coordinator is not
// reopened.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.mu.Lock()
		gs := make([]*group, 0, len(c.groups))
		for _, g := range c.groups {
			gs = append(gs, g)
		}
		c.mu.Unlock()
		for _, g := range gs {
			g.mu.Lock()
			g.stopTimers()
			g.mu.Unlock()
		}
	})
}

func (c *Coordinator) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// lookup returns the group, creating it when create is set; nil when it
// does not exist (or the coordinator is closed, for a creation). The caller
// must lock the group and look up again if it finds it dead.
func (c *Coordinator) lookup(name string, create bool) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil && create && !c.isClosed() {
		g = newGroup(c, name)
		c.groups[name] = g
	}
	return g
}

// locked returns the live group locked, or nil if it does not exist.
// A group deleted between the map lookup and the lock is dead; the map
// no longer holds it by the time its lock is released, so one more lookup
// sees the truth.
func (c *Coordinator) locked(name string, create bool) *group {
	for {
		g := c.lookup(name, create)
		if g == nil {
			return nil
		}
		g.mu.Lock()
		if !g.dead {
			return g
		}
		g.mu.Unlock()
	}
}

// Commit is the group fencing check of OffsetCommit (txn false) and
// TxnOffsetCommit (txn true), following Kafka's ClassicGroup.validateOffsetCommit
// and OffsetMetadataManager:
//
//   - generation < 0 on an unknown group, or on an Empty one: allowed (a
//     "simple" commit by a consumer outside group management, or an admin).
//   - unknown group with generation >= 0: ILLEGAL_GENERATION. The error
//     also wraps ErrGroupIDNotFound, so that a listener answering
//     OffsetCommit v9+ can return GROUP_ID_NOT_FOUND as Kafka does there.
//   - generation >= 0, or a member id, or an instance id: the member must
//     exist (UNKNOWN_MEMBER_ID), its instance id must map to it
//     (FENCED_INSTANCE_ID), and the generation must be the group's
//     (ILLEGAL_GENERATION).
//   - no generation and no member (v0-style) on a group with members:
//     UNKNOWN_MEMBER_ID for OffsetCommit; allowed for TxnOffsetCommit,
//     whose versions 0-2 carry no member information.
//   - OffsetCommit while CompletingRebalance: REBALANCE_IN_PROGRESS
//     (the member saw its JoinGroup response but has no assignment yet).
//     TxnOffsetCommit is not held to the group state.
//
// An accepted commit by a member refreshes its session.
//
// Commit runs write, the commit itself, once the check passes and under
// the group's lock, as Kafka checks and appends under it: a rebalance
// cannot come between them, so a member of an old generation that passed
// the check cannot overwrite the offsets the new generation's owner
// commits after it. (Without this: it could.) write's error is returned.
func (c *Coordinator) Commit(group string, generation int32, memberID string, instanceID *string, txn bool, write func() error) error {
	if c.isClosed() {
		return fmt.Errorf("cannot commit offsets of group %q: %w", group, ErrCoordinatorNotAvailable)
	}
	g := c.locked(group, false)
	if g == nil {
		if generation < 0 {
			return write()
		}
		return fmt.Errorf("cannot commit offsets of group %q at generation %d: %w: %w", group, generation, ErrIllegalGeneration, ErrGroupIDNotFound)
	}
	defer g.mu.Unlock()
	if err := c.validateCommit(g, generation, memberID, instanceID, txn); err != nil {
		return err
	}
	return write()
}

// validateCommit is Commit's check of a known group, locked.
func (c *Coordinator) validateCommit(g *group, generation int32, memberID string, instanceID *string, txn bool) error {
	group := g.name
	if c.isClosed() {
		return fmt.Errorf("cannot commit offsets of group %q: %w", group, ErrCoordinatorNotAvailable)
	}
	if generation < 0 && g.state == stateEmpty {
		return nil
	}
	var m *member
	if generation >= 0 || memberID != "" || instanceID != nil {
		var err error
		if m, err = g.validateMember(memberID, instanceID); err != nil {
			return fmt.Errorf("cannot commit offsets of group %q: member %q: %w", group, memberID, err)
		}
		if generation != g.generation {
			return fmt.Errorf("cannot commit offsets of group %q: generation %d, group is at %d: %w", group, generation, g.generation, ErrIllegalGeneration)
		}
	} else if !txn && g.state != stateEmpty {
		return fmt.Errorf("cannot commit offsets of group %q: no member id while the group has members: %w", group, ErrUnknownMemberID)
	}
	if !txn && g.state == stateCompletingRebalance {
		return fmt.Errorf("cannot commit offsets of group %q: %w", group, ErrRebalanceInProgress)
	}
	if m != nil {
		g.touch(m)
	}
	return nil
}

// DeleteGroup forgets a group (DeleteGroups). hasOffsets says whether the
// engine holds committed offsets for it: a group that only ever committed
// offsets (never joined here, or joined before a restart) is not known to
// the coordinator and is still deletable. It fails with ErrNonEmptyGroup
// while the group has members (any state but Empty), and with
// ErrGroupIDNotFound when neither the coordinator nor the engine knows it.
// Pending members (between MEMBER_ID_REQUIRED and their rejoin) do not make
// a group non-empty, as in Kafka; they get UNKNOWN_MEMBER_ID when they
// rejoin.
func (c *Coordinator) DeleteGroup(group string, hasOffsets bool, deleteOffsets func() error) error {
	if c.isClosed() {
		return fmt.Errorf("cannot delete group %q: %w", group, ErrCoordinatorNotAvailable)
	}
	// A group known only by its offsets is made here, Empty, so that its
	// lock covers the deletion too.
	g := c.locked(group, hasOffsets)
	if g == nil {
		return fmt.Errorf("cannot delete group %q: %w", group, ErrGroupIDNotFound)
	}
	defer g.mu.Unlock()
	if g.state != stateEmpty {
		return fmt.Errorf("cannot delete group %q: %d members, state %s: %w", group, len(g.members), g.state, ErrNonEmptyGroup)
	}
	// The offsets go under the group's lock: no member can join and
	// commit between the check above and their deletion. (Without this:
	// a new member's acknowledged commit was deleted.) If that fails the
	// group stays.
	if deleteOffsets != nil {
		if err := deleteOffsets(); err != nil {
			return fmt.Errorf("cannot delete group %q: %w", group, err)
		}
	}
	g.dead = true
	g.stopTimers()
	c.mu.Lock()
	if c.groups[group] == g {
		delete(c.groups, group)
	}
	c.mu.Unlock()
	c.log.Info("group deleted", "group", group, "generation", g.generation)
	return nil
}

// Describe reports a group's state name (Empty, PreparingRebalance,
// CompletingRebalance, Stable), generation, selected protocol ("" while
// none) and member ids, sorted; ok is false for an unknown group.
func (c *Coordinator) Describe(group string) (state string, generation int32, protocol string, members []string, ok bool) {
	g := c.locked(group, false)
	if g == nil {
		return "", 0, "", nil, false
	}
	defer g.mu.Unlock()
	members = make([]string, 0, len(g.members))
	for id := range g.members {
		members = append(members, id)
	}
	slices.Sort(members)
	return g.state.String(), g.generation, g.protocol, members, true
}

// ForgetEmptyGroups removes the groups with no members, no pending member
// ids and, by hasOffsets, no offsets in the engine, as Kafka's periodic
// offsets cleanup removes such Empty groups; it returns how many. Without
// it, every group id ever seen (a console consumer's random one, say)
// stayed for the life of the process. A group forgotten
// and joined again starts afresh, as in Kafka.
func (c *Coordinator) ForgetEmptyGroups(hasOffsets func(group string) bool) int {
	c.mu.Lock()
	names := make([]string, 0, len(c.groups))
	for name := range c.groups {
		names = append(names, name)
	}
	c.mu.Unlock()
	n := 0
	for _, name := range names {
		g := c.locked(name, false)
		if g == nil {
			continue
		}
		if g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0 && !hasOffsets(name) {
			g.dead = true
			g.stopTimers()
			c.mu.Lock()
			if c.groups[name] == g {
				delete(c.groups, name)
				n++
			}
			c.mu.Unlock()
		}
		g.mu.Unlock()
	}
	return n
}

// Groups returns how many groups the coordinator holds, Empty ones included.
func (c *Coordinator) Groups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.groups)
}

type clientIDKey struct{}

// WithClientID returns ctx carrying the request header's client id, which
// JoinGroup puts in front of the member ids it generates (clientID-uuid), as
// Kafka does. Without it the prefix is empty ("-uuid").
func WithClientID(ctx context.Context, clientID string) context.Context {
	return context.WithValue(ctx, clientIDKey{}, clientID)
}

func clientIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(clientIDKey{}).(string)
	return id
}
