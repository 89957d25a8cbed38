package group

import "github.com/idemlog/idemlog/errcode"

// Kafka codes of the group protocol, from errcode's table.
const (
	codeCoordinatorNotAvailable   = errcode.CoordinatorNotAvailable
	codeInconsistentGroupProtocol = errcode.InconsistentGroupProtocol
	codeInvalidSessionTimeout     = errcode.InvalidSessionTimeout
	codeRebalanceInProgress       = errcode.RebalanceInProgress
	codeNonEmptyGroup             = errcode.NonEmptyGroup
	codeGroupIDNotFound           = errcode.GroupIDNotFound
	codeMemberIDRequired          = errcode.MemberIDRequired
	codeFencedInstanceID          = errcode.FencedInstanceID
)

// Sentinel errors of the group coordinator, with Kafka's codes. The four
// the engine's offsets store answers too are errcode's shared values, so
// errors.Is matches whichever package produced the error.
var (
	// ErrIllegalGeneration (22): the generation is not the group's.
	ErrIllegalGeneration = errcode.ErrIllegalGeneration
	// ErrUnknownMemberID (25): the member id is not in the group.
	ErrUnknownMemberID = errcode.ErrUnknownMemberID
	// ErrInvalidGroupID (24): an empty group id.
	ErrInvalidGroupID = errcode.ErrInvalidGroupID
	// ErrInvalidRequest (42): a request no conforming client sends.
	ErrInvalidRequest = errcode.ErrInvalidRequest

	// ErrCoordinatorNotAvailable (15): the coordinator is closed, or the
	// call was abandoned (context done) before it completed.
	ErrCoordinatorNotAvailable = errcode.New(codeCoordinatorNotAvailable, "coordinator not available")
	// ErrInconsistentGroupProtocol (23): the protocol type differs from
	// the group's, no protocol is shared with every member, or a v5+
	// SyncGroup names another protocol type or name.
	ErrInconsistentGroupProtocol = errcode.New(codeInconsistentGroupProtocol, "inconsistent group protocol")
	// ErrInvalidSessionTimeout (26): outside [MinSessionTimeout, MaxSessionTimeout].
	ErrInvalidSessionTimeout = errcode.New(codeInvalidSessionTimeout, "invalid session timeout")
	// ErrRebalanceInProgress (27): the member must rejoin.
	ErrRebalanceInProgress = errcode.New(codeRebalanceInProgress, "rebalance in progress")
	// ErrNonEmptyGroup (68): DeleteGroup of a group with members.
	ErrNonEmptyGroup = errcode.New(codeNonEmptyGroup, "group is not empty")
	// ErrGroupIDNotFound (69): DeleteGroup of a group nobody knows. A
	// member commit to an unknown group wraps it next to
	// ErrIllegalGeneration (see Coordinator.Commit).
	ErrGroupIDNotFound = errcode.New(codeGroupIDNotFound, "group id not found")
	// ErrMemberIDRequired (79): JoinGroup v4+ with an empty member id; the
	// response carries the id to rejoin with.
	ErrMemberIDRequired = errcode.New(codeMemberIDRequired, "member id required")
	// ErrFencedInstanceID (82): the group instance id now belongs to
	// another member id (a newer instance of the static member joined).
	ErrFencedInstanceID = errcode.New(codeFencedInstanceID, "fenced instance id")
)
