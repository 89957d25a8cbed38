package kafka

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/idemlog/idemlog/kafka/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOperations are the operations DescribeGroups v3+ reports a client
// authorized for when it asks (KIP-430), with no authorizer: every one a
// group supports, READ 3, DELETE 6 and DESCRIBE 8, as AclOperation bits.
const groupOperations = 1<<3 | 1<<6 | 1<<8

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

// clientHost is how Kafka writes a client's address in DescribeGroups:
// "/" and the IP address (Java's InetAddress.toString with no host name),
// an IPv6 one with all eight groups, none compressed, as Java's
// Inet6Address.getHostAddress writes it.
func clientHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ta.IP.To4() != nil || len(ta.IP) != net.IPv6len {
			return "/" + ta.IP.String()
		}
		groups := make([]string, 8)
		for i := range groups {
			groups[i] = strconv.FormatUint(uint64(ta.IP[2*i])<<8|uint64(ta.IP[2*i+1]), 16)
		}
		host := strings.Join(groups, ":")
		if ta.Zone != "" {
			host += "%" + ta.Zone
		}
		return "/" + host
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return "/" + host
	}
	return "/" + a.String()
}
