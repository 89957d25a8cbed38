package kafka

import (
	"net"
	"testing"
)

// TestReview17ClientHostIPv6: Kafka writes a member's client host as
// InetAddress.toString of the connection's peer, "/" + getHostAddress();
// Java's Inet6Address.getHostAddress never compresses zeros
// ("0:0:0:0:0:0:0:1"), unlike Go's net.IP.String ("::1").
func TestReview17ClientHostIPv6(t *testing.T) {
	for _, c := range []struct {
		ip   string
		want string
	}{
		{"::1", "/0:0:0:0:0:0:0:1"},
		{"2001:db8::1", "/2001:db8:0:0:0:0:0:1"},
		{"127.0.0.1", "/127.0.0.1"},
	} {
		if got := clientHost(&net.TCPAddr{IP: net.ParseIP(c.ip), Port: 5000}); got != c.want {
			t.Errorf("clientHost(%s) = %q, want %q as Kafka writes it", c.ip, got, c.want)
		}
	}
}
