package kafka

// DescribeGroups (key 15), versions 0-5: a group's state, protocol and
// members, Kafka's way (an unknown group is Dead, not an error).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOperations are the operations DescribeGroups v3+ reports a client
// authorized for when it asks (KIP-430), with no authorizer: every one a
// group supports, READ 3, DELETE 6 and DESCRIBE 8, as AclOperation bits.
const groupOperations = 1<<3 | 1<<6 | 1<<8

// describeGroups answers DescribeGroups v0-5, Kafka's way: an unknown
// group is no error but state Dead with no members; a group that only has
// offsets is Empty; the protocol and each member's metadata and
// assignment are shown only while the group is Stable.
func (s *Server) describeGroups(r *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range r.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		d, ok := s.groups.DescribeGroup(name)
		if !ok && s.eng.Frontend().GroupHasOffsets(name) {
			d.State = "Empty"
		}
		g.Group, g.State, g.ProtocolType, g.Protocol = name, d.State, d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.ClientID, gm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			if r.Version >= 4 {
				gm.InstanceID = m.InstanceID
			}
			gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
			g.Members = append(g.Members, gm)
		}
		if r.Version >= 3 && r.IncludeAuthorizedOperations {
			g.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
