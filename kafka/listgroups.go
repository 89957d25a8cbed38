package kafka

// ListGroups (key 16), versions 0-4: the groups the coordinator holds and
// those that only have committed offsets, filtered by state (v4).

import (
	"cmp"
	"slices"

	"github.com/idemlog/idemlog/kafka/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listGroups answers ListGroups v0-4: the groups the coordinator holds
// and those that only have offsets (Kafka keeps both, loaded from its
// offsets topic, until the offsets expire), the latter Empty and with no
// protocol type; v4's StatesFilter keeps those in the states it names.
func (s *Server) listGroups(r *kmsg.ListGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	withOffsets, err := s.eng.Frontend().OffsetGroups()
	if err != nil {
		resp.ErrorCode = s.code(kmsg.ListGroups, err)
		return resp
	}
	held := s.groups.List()
	listed := make(map[string]bool, len(held))
	var filter []string
	if r.Version >= 4 {
		filter = r.StatesFilter
	}
	add := func(l group.Listing) {
		listed[l.Group] = true
		if !group.StateMatches(l.State, filter) {
			return
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = l.Group, l.ProtocolType, l.State
		resp.Groups = append(resp.Groups, g)
	}
	for _, l := range held {
		add(l)
	}
	for _, name := range withOffsets {
		if !listed[name] {
			add(group.Listing{Group: name, State: "Empty"})
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return cmp.Compare(a.Group, b.Group) })
	return resp
}
