package group

import (
	"bytes"
	"context"
	"slices"
	"strings"
)

// Listing is one group as ListGroups shows it.
type Listing struct {
	Group        string
	ProtocolType string // "" for a group that has had no member
	State        string // Empty, PreparingRebalance, CompletingRebalance, Stable
}

// Description is one group as DescribeGroups shows it (Kafka's
// GroupMetadata.summary): the selected protocol and each member's metadata
// and assignment only while the group is Stable, since in any other state
// the assignment is being replaced and the protocol may change.
type Description struct {
	Group        string
	State        string
	ProtocolType string
	Protocol     string
	Members      []MemberDescription // in join order
}

// MemberDescription is one member of a described group. Byte slices are
// copies, the caller's to keep.
type MemberDescription struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte // for the selected protocol; nil unless Stable
	Assignment []byte // nil unless Stable
}

// DeadState is what DescribeGroups reports for a group the coordinator
// does not hold (Kafka answers an unknown group with no error and this
// state, up to DescribeGroups v5).
const DeadState = "Dead"

// List returns every group the coordinator holds, Empty ones included,
// sorted by name.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	names := make([]string, 0, len(c.groups))
	for name := range c.groups {
		names = append(names, name)
	}
	c.mu.Unlock()
	slices.Sort(names)
	out := make([]Listing, 0, len(names))
	for _, name := range names {
		g := c.locked(name, false)
		if g == nil {
			continue // deleted meanwhile
		}
		out = append(out, Listing{Group: name, ProtocolType: g.protocolType, State: g.state.String()})
		g.mu.Unlock()
	}
	return out
}

// DescribeGroup describes a group; ok is false when the coordinator does
// not hold it.
func (c *Coordinator) DescribeGroup(name string) (d Description, ok bool) {
	g := c.locked(name, false)
	if g == nil {
		return Description{Group: name, State: DeadState}, false
	}
	defer g.mu.Unlock()
	d = Description{Group: name, State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == stateStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.sorted() {
		md := MemberDescription{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost}
		if m.instanceID != nil {
			id := *m.instanceID
			md.InstanceID = &id
		}
		if stable {
			md.Metadata = bytes.Clone(m.metadata(g.protocol))
			md.Assignment = bytes.Clone(m.assignment)
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}

// StateMatches reports whether state is one of filter, compared without
// regard to case as Kafka does (ListGroups v4's StatesFilter); an empty
// filter matches every state.
func StateMatches(state string, filter []string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, state) {
			return true
		}
	}
	return false
}

type clientHostKey struct{}

// WithClientHost returns ctx carrying the address of the connection a
// JoinGroup came on, which DescribeGroups reports as the member's client
// host; Kafka writes it as "/" and the IP address.
func WithClientHost(ctx context.Context, host string) context.Context {
	return context.WithValue(ctx, clientHostKey{}, host)
}

func clientHostFrom(ctx context.Context) string {
	h, _ := ctx.Value(clientHostKey{}).(string)
	return h
}
