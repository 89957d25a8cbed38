package kafka

// DeleteGroups (key 42), versions 0-2: a group with no members is deleted
// with its committed offsets; one with members is refused
// (NON_EMPTY_GROUP).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) deleteGroups(r *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range r.Groups {
		gr := kmsg.NewDeleteGroupsResponseGroup()
		gr.Group = g
		err := s.groups.DeleteGroup(g, s.eng.Frontend().GroupHasOffsets(g), func() error {
			_, err := s.eng.Frontend().DeleteGroupOffsets(g)
			return err
		})
		gr.ErrorCode = s.code(kmsg.DeleteGroups, err)
		resp.Groups = append(resp.Groups, gr)
	}
	return resp
}
