package group

import (
	"bytes"
	"context"

	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup handles SyncGroup v0-5. The leader's call stores the assignment
// and answers every parked member; a follower's call parks until then,
// until a rebalance voids the generation (REBALANCE_IN_PROGRESS), until the
// sync timer removes a leader that never syncs (same), or until ctx is done
// or the coordinator closes (COORDINATOR_NOT_AVAILABLE).
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.MemberAssignment = []byte{}
	fail := func(err error) *kmsg.SyncGroupResponse {
		resp.ErrorCode = errcode.Code(err)
		return resp
	}
	if c.isClosed() {
		return fail(ErrCoordinatorNotAvailable)
	}
	if req.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	// From v5 the protocol type and name are mandatory (KafkaApis).
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		return fail(ErrInconsistentGroupProtocol)
	}
	instanceID := req.InstanceID
	if req.Version < 3 {
		instanceID = nil
	}
	g := c.locked(req.Group, false)
	if g == nil {
		return fail(ErrUnknownMemberID)
	}
	if c.isClosed() {
		g.mu.Unlock()
		return fail(ErrCoordinatorNotAvailable)
	}
	call := g.sync(req, instanceID, resp)
	g.mu.Unlock()
	if call == nil {
		return resp
	}
	return c.awaitSync(ctx, g, call)
}

func (g *group) sync(req *kmsg.SyncGroupRequest, instanceID *string, resp *kmsg.SyncGroupResponse) *syncCall {
	fail := func(err error) *syncCall {
		resp.ErrorCode = errcode.Code(err)
		return nil
	}
	m, err := g.validateMember(req.MemberID, instanceID)
	if err != nil {
		return fail(err)
	}
	if req.Generation != g.generation {
		return fail(ErrIllegalGeneration)
	}
	if inconsistent(req.ProtocolType, g.protocolType) || inconsistent(req.Protocol, g.protocol) {
		return fail(ErrInconsistentGroupProtocol)
	}
	switch g.state {
	case statePreparingRebalance:
		g.touch(m)
		return fail(ErrRebalanceInProgress)
	case stateStable:
		g.touch(m)
		g.removePendingSync(m.id)
		g.fillSync(resp, m)
		return nil
	case stateCompletingRebalance:
		g.touch(m)
		g.answerSync(m, codeRebalanceInProgress) // superseded by this call
		call := &syncCall{m: m, req: req, ch: make(chan *kmsg.SyncGroupResponse, 1)}
		m.sync = call
		g.removePendingSync(m.id)
		if m.id == g.leader {
			g.assign(req.GroupAssignment)
		}
		return call
	}
	return fail(ErrUnknownMemberID)
}

// assign stores the leader's assignment (members it left out get empty
// bytes, ids not in the group are ignored), makes the group Stable and
// answers every parked SyncGroup.
func (g *group) assign(plan []kmsg.SyncGroupRequestGroupAssignment) {
	byID := make(map[string][]byte, len(plan))
	for _, a := range plan {
		byID[a.MemberID] = a.MemberAssignment
	}
	missing := 0
	for id, m := range g.members {
		a, ok := byID[id]
		if !ok {
			missing++
		}
		m.assignment = bytes.Clone(a)
		if m.assignment == nil {
			m.assignment = []byte{}
		}
	}
	g.transition(stateStable)
	g.c.log.Info("group stable", "group", g.name, "generation", g.generation, "members", len(g.members), "unassigned", missing)
	for _, m := range g.sorted() {
		if g.answerSync(m, 0) {
			g.touch(m)
		}
	}
}

func inconsistent(reqValue *string, groupValue string) bool {
	return reqValue != nil && groupValue != "" && *reqValue != groupValue
}

func (c *Coordinator) awaitSync(ctx context.Context, g *group, call *syncCall) *kmsg.SyncGroupResponse {
	select {
	case r := <-call.ch:
		return r
	case <-ctx.Done():
	case <-c.closed:
	}
	g.mu.Lock()
	select {
	case r := <-call.ch:
		g.mu.Unlock()
		return r
	default:
	}
	// The member stays; its session runs again from here.
	if call.m.sync == call {
		call.m.sync = nil
	}
	g.mu.Unlock()
	resp := call.req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.MemberAssignment = []byte{}
	resp.ErrorCode = codeCoordinatorNotAvailable
	return resp
}

// Heartbeat handles Heartbeat v0-4. It refreshes the session of a member of
// the current generation and says whether it must rejoin: REBALANCE_IN_PROGRESS
// while PreparingRebalance. In CompletingRebalance it succeeds, as in Kafka
// since 2.x: a member that has its JoinGroup response may heartbeat before
// its SyncGroup.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = errcode.Code(c.heartbeat(req))
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) error {
	if c.isClosed() {
		return ErrCoordinatorNotAvailable
	}
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	instanceID := req.InstanceID
	if req.Version < 3 {
		instanceID = nil
	}
	g := c.locked(req.Group, false)
	if g == nil {
		return ErrUnknownMemberID
	}
	defer g.mu.Unlock()
	if c.isClosed() {
		return ErrCoordinatorNotAvailable
	}
	m, err := g.validateMember(req.MemberID, instanceID)
	if err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	switch g.state {
	case statePreparingRebalance:
		g.touch(m)
		return ErrRebalanceInProgress
	case stateCompletingRebalance, stateStable:
		g.touch(m)
		return nil
	}
	return ErrUnknownMemberID
}

// LeaveGroup handles LeaveGroup v0-5: one member id below v3, a batch of
// member ids and/or instance ids from v3, each with its own error code. An
// instance id with an empty member id removes whichever member holds it (an
// admin's removal); with a member id, the two must match
// (FENCED_INSTANCE_ID). Leaving rebalances the group; the last member
// leaving makes it Empty. Parked calls of a member that leaves get
// UNKNOWN_MEMBER_ID.
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if c.isClosed() {
		resp.ErrorCode = codeCoordinatorNotAvailable
		return resp
	}
	if req.Group == "" {
		resp.ErrorCode = ErrInvalidGroupID.KafkaCode()
		return resp
	}
	var leaving []leaver
	if req.Version < 3 {
		leaving = []leaver{{memberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			leaving = append(leaving, leaver{memberID: m.MemberID, instanceID: m.InstanceID})
		}
	}
	codes := make([]int16, len(leaving))
	if g := c.locked(req.Group, false); g == nil {
		// Kafka answers an unknown group member by member.
		for i := range codes {
			codes[i] = ErrUnknownMemberID.KafkaCode()
		}
	} else {
		if c.isClosed() {
			g.mu.Unlock()
			resp.ErrorCode = codeCoordinatorNotAvailable
			return resp
		}
		g.leave(leaving, codes)
		g.mu.Unlock()
	}
	if req.Version < 3 {
		resp.ErrorCode = codes[0]
		return resp
	}
	for i, l := range leaving {
		mr := kmsg.NewLeaveGroupResponseMember()
		mr.MemberID = l.memberID
		mr.InstanceID = l.instanceID
		mr.ErrorCode = codes[i]
		resp.Members = append(resp.Members, mr)
	}
	return resp
}

type leaver struct {
	memberID   string
	instanceID *string
}

func (g *group) leave(leaving []leaver, codes []int16) {
	left := false
	for i, l := range leaving {
		switch {
		case l.memberID == "":
			var m *member
			if l.instanceID != nil {
				m = g.members[g.static[*l.instanceID]]
			}
			if m == nil {
				codes[i] = ErrUnknownMemberID.KafkaCode()
				continue
			}
			g.c.log.Info("static member removed", "group", g.name, "instance", *l.instanceID, "member", m.id)
			g.removeMember(m)
		case g.removePending(l.memberID):
		default:
			m, err := g.validateMember(l.memberID, l.instanceID)
			if err != nil {
				codes[i] = errcode.Code(err)
				continue
			}
			g.c.log.Info("member left", "group", g.name, "member", m.id)
			g.removeMember(m)
		}
		left = true
	}
	if !left {
		return
	}
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance("members left")
	case statePreparingRebalance:
		g.maybeCompleteJoinPhase()
	}
}
