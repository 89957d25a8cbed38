package group

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestDescribeGroup: a Stable group shows its protocol and, per member in
// join order, the client's id and host, the instance id, the member's
// metadata for the selected protocol and its assignment, as copies. While
// it rebalances it shows neither protocol nor metadata nor assignments
// (Kafka's summaryNoMetadata); an unknown group is Dead.
func TestDescribeGroup(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 5).static("inst-a")
	b := newClient(t, c, "g", 5)
	a.clientID, a.host, a.protocols = "client-a", "/10.0.0.1", []proto{{"roundrobin", "rr-a"}, {"range", "meta-a"}}
	b.clientID, b.host, b.protocols = "client-b", "/10.0.0.2", []proto{{"range", "meta-b"}}
	stableGroup(t, a, b)

	d, ok := c.DescribeGroup("g")
	if !ok || d.Group != "g" || d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" {
		t.Fatalf("DescribeGroup = %+v, %v; want g Stable consumer range", d, ok)
	}
	if len(d.Members) != 2 {
		t.Fatalf("%d members, want 2: %+v", len(d.Members), d.Members)
	}
	for i, want := range []struct {
		cl             *client
		instance, meta string
	}{{a, "inst-a", "meta-a"}, {b, "", "meta-b"}} {
		m := d.Members[i]
		inst := ""
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		if m.MemberID != want.cl.id || m.ClientID != want.cl.clientID || m.ClientHost != want.cl.host || inst != want.instance ||
			string(m.Metadata) != want.meta || string(m.Assignment) != "assigned:"+want.cl.id {
			t.Errorf("member %d = {%s %s %s %q %q %q}, want {%s %s %s %q %q %q}", i,
				m.MemberID, m.ClientID, m.ClientHost, inst, m.Metadata, m.Assignment,
				want.cl.id, want.cl.clientID, want.cl.host, want.instance, want.meta, "assigned:"+want.cl.id)
		}
	}
	// The slices are the caller's: writing them changes nothing held.
	d.Members[0].Metadata[0], d.Members[0].Assignment[0] = 'X', 'X'
	*d.Members[0].InstanceID = "changed"
	again, _ := c.DescribeGroup("g")
	if m := again.Members[0]; string(m.Metadata) != "meta-a" || string(m.Assignment) != "assigned:"+a.id || *m.InstanceID != "inst-a" {
		t.Fatalf("a described copy aliased the group's state: %q %q %q", m.Metadata, m.Assignment, *m.InstanceID)
	}

	// A third member's join starts a rebalance.
	cc := newClient(t, c, "g", 5)
	go cc.join(context.Background())
	waitFor(t, 5*time.Second, "rebalance", func() bool { return describe(t, c, "g").state == "PreparingRebalance" })
	d, _ = c.DescribeGroup("g")
	if d.State != "PreparingRebalance" || d.Protocol != "" {
		t.Fatalf("while rebalancing: state %s, protocol %q; want PreparingRebalance and none", d.State, d.Protocol)
	}
	for _, m := range d.Members {
		if m.Metadata != nil || m.Assignment != nil {
			t.Errorf("member %s shows metadata %q, assignment %q while rebalancing", m.MemberID, m.Metadata, m.Assignment)
		}
	}

	if d, ok := c.DescribeGroup("nope"); ok || d.State != DeadState || d.Group != "nope" || len(d.Members) != 0 {
		t.Fatalf("unknown group described as %+v, %v; want Dead", d, ok)
	}
}

// TestListGroups: every group held, Empty ones included, sorted, with its
// protocol type and state; the state filter ignores case.
func TestListGroups(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	if l := c.List(); len(l) != 0 {
		t.Fatalf("new coordinator lists %+v", l)
	}
	b := newClient(t, c, "b", 4)
	stableGroup(t, b)
	a := newClient(t, c, "a", 4)
	a.ptype = "connect"
	stableGroup(t, a)
	wantCode(t, "leave", a.leave(), wantNone)
	got := c.List()
	want := []Listing{{"a", "connect", "Empty"}, {"b", "consumer", "Stable"}}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		state  string
		filter []string
		want   bool
	}{
		{"Stable", nil, true},
		{"Stable", []string{"stable"}, true},
		{"Empty", []string{"STABLE", "empty"}, true},
		{"PreparingRebalance", []string{"Stable", "Empty"}, false},
	} {
		if got := StateMatches(tc.state, tc.filter); got != tc.want {
			t.Errorf("StateMatches(%q, %q) = %v, want %v", tc.state, tc.filter, got, tc.want)
		}
	}
}
