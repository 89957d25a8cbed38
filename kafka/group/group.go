package group

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return "Unknown"
}

// group is one classic group. Every field is guarded by mu; timers take mu
// in their callbacks and re-check that what they were armed for still holds.
type group struct {
	c    *Coordinator
	name string

	mu sync.Mutex
	// dead: deleted from the coordinator's map; whoever locks it must
	// look the name up again.
	dead bool

	state, prevState state
	generation       int32
	protocolType     string // set by the first member of an Empty group
	protocol         string // selected at each join completion; "" when Empty
	leader           string // "" iff there are no members

	members map[string]*member
	// pending: ids handed out with MEMBER_ID_REQUIRED, not yet rejoined.
	// They hold the join phase back, as in Kafka, until they rejoin or
	// their session timeout passes.
	pending map[string]*pendingMember
	static  map[string]string // instance id -> member id
	// supported counts, per protocol name, the members that list it.
	supported map[string]int
	// awaitingJoin counts members with a parked JoinGroup.
	awaitingJoin int
	// pendingSync: members given a JoinGroup response that have not sent
	// SyncGroup; removed when the sync timer fires.
	pendingSync map[string]struct{}
	// newMemberAdded extends the initial rebalance delay.
	newMemberAdded bool
	seq            uint64

	// The join and sync timers are replaced, never reset; an epoch per
	// timer lets a callback that lost the race with Stop know it is stale.
	joinTimer *time.Timer
	joinEpoch uint64
	syncTimer *time.Timer
	syncEpoch uint64
}

type member struct {
	id           string
	instanceID   *string
	clientID     string
	clientHost   string
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol // owned copies, unique names

	sessionTimeout, rebalanceTimeout time.Duration
	assignment                       []byte
	// isNew: has not yet received a JoinGroup response. A new member whose
	// parked JoinGroup is abandoned is removed at once: below v4 its
	// client never learnt its id.
	isNew bool
	seq   uint64 // join order: leader succession and member lists

	join *joinCall // parked JoinGroup
	sync *syncCall // parked SyncGroup

	deadline time.Time
	timer    *time.Timer
}

type pendingMember struct {
	id    string
	timer *time.Timer
}

// joinCall and syncCall are parked requests. The channel has room for the
// one response; it is sent under the group's lock after the call is
// detached from its member, so a call is answered at most once and the
// sender never blocks.
type joinCall struct {
	m   *member
	req *kmsg.JoinGroupRequest
	ch  chan *kmsg.JoinGroupResponse
}

type syncCall struct {
	m   *member
	req *kmsg.SyncGroupRequest
	ch  chan *kmsg.SyncGroupResponse
}

func newGroup(c *Coordinator, name string) *group {
	return &group{
		c:           c,
		name:        name,
		state:       stateEmpty,
		prevState:   stateDead,
		members:     make(map[string]*member),
		pending:     make(map[string]*pendingMember),
		static:      make(map[string]string),
		supported:   make(map[string]int),
		pendingSync: make(map[string]struct{}),
	}
}

// after runs f under the group's lock after d, unless the group is dead or
// the coordinator closed by then.
func (g *group) after(d time.Duration, f func()) *time.Timer {
	return time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.dead || g.c.isClosed() {
			return
		}
		f()
	})
}

func (g *group) stopTimers() {
	g.cancelJoinTimer()
	g.cancelSyncTimer()
	for _, m := range g.members {
		if m.timer != nil {
			m.timer.Stop()
		}
	}
	for _, p := range g.pending {
		p.timer.Stop()
	}
}

func (g *group) scheduleJoin(d time.Duration, f func()) {
	g.cancelJoinTimer()
	e := g.joinEpoch
	g.joinTimer = g.after(d, func() {
		if g.joinEpoch != e {
			return
		}
		g.joinTimer = nil
		f()
	})
}

func (g *group) cancelJoinTimer() {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.joinEpoch++
}

func (g *group) scheduleSync(d time.Duration, f func()) {
	g.cancelSyncTimer()
	e := g.syncEpoch
	g.syncTimer = g.after(d, func() {
		if g.syncEpoch != e {
			return
		}
		g.syncTimer = nil
		f()
	})
}

func (g *group) cancelSyncTimer() {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	g.syncEpoch++
}

func (g *group) transition(s state) {
	g.c.log.Debug("group state", "group", g.name, "from", g.state, "to", s, "generation", g.generation)
	g.prevState, g.state = g.state, s
}

// touch restarts a member's session. The timer is reset rather than
// replaced; its callback re-reads the deadline, so a stale firing only
// re-arms it.
func (g *group) touch(m *member) {
	m.deadline = time.Now().Add(m.sessionTimeout)
	if m.timer == nil {
		m.timer = g.after(m.sessionTimeout, func() { g.sessionCheck(m) })
		return
	}
	m.timer.Reset(m.sessionTimeout)
}

func (g *group) sessionCheck(m *member) {
	if g.members[m.id] != m {
		return
	}
	// A member parked in JoinGroup or SyncGroup cannot heartbeat (its
	// client waits on the response): Kafka counts it as alive. Its
	// parked call ends when the rebalance step completes or its context
	// is done, and the session runs again from there.
	if m.join != nil || m.sync != nil {
		g.touch(m)
		return
	}
	if left := time.Until(m.deadline); left > 0 {
		m.timer.Reset(left)
		return
	}
	g.c.log.Info("member session expired", "group", g.name, "member", m.id, "generation", g.generation, "state", g.state)
	g.removeMember(m)
	g.afterRemoval()
}

func (g *group) addPending(id string, session time.Duration) {
	p := &pendingMember{id: id}
	p.timer = g.after(session, func() {
		if g.pending[id] != p {
			return
		}
		g.c.log.Info("pending member expired", "group", g.name, "member", id)
		delete(g.pending, id)
		// Not an initial join's delay: only its timer ends that, as
		// Kafka's InitialDelayedJoin.
		g.maybeCompleteJoinPhase()
	})
	g.pending[id] = p
}

func (g *group) removePending(id string) bool {
	p, ok := g.pending[id]
	if ok {
		p.timer.Stop()
		delete(g.pending, id)
	}
	return ok
}

// validateMember is Kafka's ClassicGroup.validateMember: with an instance id
// the id must map to memberID (another mapping fences this one), and the
// member must exist.
func (g *group) validateMember(memberID string, instanceID *string) (*member, error) {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return nil, ErrUnknownMemberID
		}
		if cur != memberID {
			return nil, ErrFencedInstanceID
		}
	}
	m, ok := g.members[memberID]
	if !ok {
		return nil, ErrUnknownMemberID
	}
	return m, nil
}

func (g *group) allJoined() bool {
	return len(g.members) == g.awaitingJoin && len(g.pending) == 0
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// sorted returns the members in join order, so that member lists, votes
// and leader succession do not depend on map iteration.
func (g *group) sorted() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

func (g *group) incSupported(m *member) {
	for _, p := range m.protocols {
		g.supported[p.Name]++
	}
}

func (g *group) decSupported(m *member) {
	for _, p := range m.protocols {
		if g.supported[p.Name]--; g.supported[p.Name] <= 0 {
			delete(g.supported, p.Name)
		}
	}
}

// supports is Kafka's supportsProtocols: an Empty group takes any non-empty
// protocol type and list; otherwise the type must be the group's and one of
// the protocols must be listed by every current member.
func (g *group) supports(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == stateEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member lists,
// each member votes for the first in its own order, and the most votes
// win. Kafka breaks ties by hash-map order; here the protocol voted for by
// the earliest-joined member wins, so the choice is reproducible.
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	var order []string
	for _, m := range g.sorted() {
		for _, p := range m.protocols {
			if g.supported[p.Name] == len(g.members) {
				if votes[p.Name] == 0 {
					order = append(order, p.Name)
				}
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}

func (g *group) nextSeq() uint64 {
	g.seq++
	return g.seq
}

// answerJoin detaches and answers m's parked JoinGroup, if any.
func (g *group) answerJoin(m *member, fill func(*kmsg.JoinGroupResponse)) bool {
	call := m.join
	if call == nil {
		return false
	}
	m.join = nil
	g.awaitingJoin--
	resp := call.req.ResponseKind().(*kmsg.JoinGroupResponse)
	fill(resp)
	call.ch <- resp
	return true
}

// answerSync detaches and answers m's parked SyncGroup, if any. A success
// carries the group's protocol and m's assignment.
func (g *group) answerSync(m *member, code int16) bool {
	call := m.sync
	if call == nil {
		return false
	}
	m.sync = nil
	// The member's session starts again with the answer, an error
	// included, as Kafka's propagateAssignment restarts its heartbeat
	// timer: it could not heartbeat while parked, and must get a whole
	// session to rejoin. (Without this: a follower parked until a rebalance
	// voided its sync expired before it could rejoin.)
	g.touch(m)
	resp := call.req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	resp.MemberAssignment = []byte{}
	if code == 0 {
		g.fillSync(resp, m)
	}
	call.ch <- resp
	return true
}

func (g *group) fillSync(resp *kmsg.SyncGroupResponse, m *member) {
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType = &pt
	resp.Protocol = &p
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
}

// fillJoin fills a successful JoinGroup response for m at the current
// generation; the member list goes to the leader only.
func (g *group) fillJoin(resp *kmsg.JoinGroupResponse, m *member, withMembers bool) {
	resp.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType = &pt
	resp.Protocol = &p
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if withMembers {
		resp.Members = g.joinMembers()
	}
}

func (g *group) joinMembers() []kmsg.JoinGroupResponseMember {
	ms := g.sorted()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata(g.protocol)
		out = append(out, jm)
	}
	return out
}

// removeMember drops m: its parked calls get UNKNOWN_MEMBER_ID (so a
// client still waiting rejoins), its session stops, the leadership passes
// to the earliest-joined member left. The caller decides what the group
// does next (afterRemoval, or its own rule).
func (g *group) removeMember(m *member) {
	g.answerJoin(m, func(r *kmsg.JoinGroupResponse) { r.ErrorCode = ErrUnknownMemberID.KafkaCode() })
	g.answerSync(m, ErrUnknownMemberID.KafkaCode())
	if m.timer != nil {
		m.timer.Stop()
	}
	delete(g.members, m.id)
	g.decSupported(m)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sorted(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// afterRemoval is Kafka's rule after a member leaves involuntarily
// (session expiry, abandoned join): a settled group rebalances, and a
// rebalance that was only waiting for that member completes.
func (g *group) afterRemoval() {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance("member removed")
	case statePreparingRebalance:
		g.maybeCompleteJoinPhase() // not an initial join's delay (above)
	}
}

func (g *group) canRebalance() bool {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		return true
	}
	return false
}

func (g *group) maybePrepareRebalanceOrCompleteJoin(reason string) {
	if g.canRebalance() {
		g.prepareRebalance(reason)
		return
	}
	g.maybeCompleteJoinPhase()
}

// maybeCompleteJoinPhase completes a rebalance once every member has
// rejoined, except the initial one, which its delay timer completes.
func (g *group) maybeCompleteJoinPhase() {
	if g.state == statePreparingRebalance && g.prevState != stateEmpty && g.allJoined() {
		g.completeJoin()
	}
}

func (g *group) prepareRebalance(reason string) {
	if g.state == stateCompletingRebalance {
		// The assignment being synced is void: have the members
		// parked in SyncGroup rejoin.
		for _, m := range g.members {
			m.assignment = []byte{}
		}
		for _, m := range g.sorted() {
			g.answerSync(m, codeRebalanceInProgress)
		}
	}
	g.cancelSyncTimer()
	clear(g.pendingSync)
	initial := g.state == stateEmpty
	g.transition(statePreparingRebalance)
	g.c.log.Info("preparing rebalance", "group", g.name, "generation", g.generation, "reason", reason)
	if !initial {
		if g.allJoined() {
			g.completeJoin()
			return
		}
		g.scheduleJoin(g.rebalanceTimeout(), g.completeJoin)
		return
	}
	delay := g.c.opts.InitialRebalanceDelay
	if delay <= 0 {
		g.completeJoin()
		return
	}
	remaining := max(g.rebalanceTimeout()-delay, 0)
	g.scheduleJoin(delay, func() { g.tryCompleteInitial(delay, remaining) })
}

// tryCompleteInitial is Kafka's delayed initial rebalance: each new member
// within the delay extends it by another delay, up to the rebalance timeout.
func (g *group) tryCompleteInitial(delay, remaining time.Duration) {
	if g.newMemberAdded && remaining > 0 {
		g.newMemberAdded = false
		next := min(g.c.opts.InitialRebalanceDelay, remaining)
		left := max(remaining-delay, 0)
		g.scheduleJoin(next, func() { g.tryCompleteInitial(next, left) })
		return
	}
	g.completeJoin()
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// removed (static ones stay, as in Kafka, until their session or the sync
// timer removes them), the generation advances, and every parked JoinGroup
// is answered.
func (g *group) completeJoin() {
	g.cancelJoinTimer()
	for _, m := range g.sorted() {
		if m.join == nil && m.instanceID == nil {
			g.c.log.Info("member did not rejoin", "group", g.name, "member", m.id, "generation", g.generation)
			g.removeMember(m)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left: wait
		// for them (or their sessions) another rebalance timeout.
		g.scheduleJoin(g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	g.newMemberAdded = false
	clear(g.pendingSync)
	if len(g.members) == 0 {
		g.protocol = ""
		g.transition(stateEmpty)
		g.c.log.Info("group empty", "group", g.name, "generation", g.generation)
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(stateCompletingRebalance)
	g.c.log.Info("join phase complete", "group", g.name, "generation", g.generation, "protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	for _, m := range g.sorted() {
		g.answerJoin(m, func(r *kmsg.JoinGroupResponse) { g.fillJoin(r, m, m.id == g.leader) })
		g.touch(m)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	gen := g.generation
	g.scheduleSync(g.rebalanceTimeout(), func() { g.expirePendingSync(gen) })
}

// electJoinedLeader keeps the leader if it rejoined, else hands leadership
// to the earliest-joined member that did; false if none did.
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].join != nil {
		return true
	}
	for _, m := range g.sorted() {
		if m.join != nil {
			g.c.log.Info("leader did not rejoin", "group", g.name, "old", g.leader, "new", m.id)
			g.leader = m.id
			return true
		}
	}
	return false
}

// expirePendingSync removes the members that got a JoinGroup response for
// gen but never sent SyncGroup within the rebalance timeout: without it a
// follower would wait forever on a leader that is gone.
func (g *group) expirePendingSync(gen int32) {
	if gen != g.generation || len(g.pendingSync) == 0 {
		return
	}
	if g.state != stateCompletingRebalance && g.state != stateStable {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			g.c.log.Info("member did not sync", "group", g.name, "member", id, "generation", gen)
			g.removeMember(m)
		}
	}
	clear(g.pendingSync)
	g.prepareRebalance("members did not sync")
}

func (g *group) removePendingSync(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.cancelSyncTimer()
	}
}

// newMemberID is Kafka's generateMemberId: the instance id for a static
// member, else the client id, then "-" and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	return prefix + "-" + randomUUID()
}

func randomUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}
