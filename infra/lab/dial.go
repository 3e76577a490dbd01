package lab

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// Dialer opens connections from the lab's gateway namespace (hl-gw), the
// only place lab addresses are reachable from: the machine's own namespace
// has no route to them by design. Its DialContext fits client-go's
// rest.Config.Dial, grpc.WithContextDialer (the etcd client) and, with
// ssh.NewClientConn, x/crypto/ssh.
type Dialer struct {
	// Netns is the lab's gateway namespace (Names.Gateway).
	Netns string
	// Subnet, when set, is the only place connections may go.
	Subnet *net.IPNet
	// Names maps node names to addresses, so "cp-1:22" works.
	Names map[string]string
}

// Dialer returns a dialer that knows the lab's subnet and node names.
func (l *Lab) Dialer() (*Dialer, error) {
	s, err := l.LoadState()
	if err != nil {
		return nil, err
	}
	return s.Dialer()
}

// Dialer returns a dialer for this state's subnet and names.
func (s *State) Dialer() (*Dialer, error) {
	_, subnet, err := net.ParseCIDR(s.CIDR)
	if err != nil {
		return nil, err
	}
	d := &Dialer{Netns: s.Names().Gateway(), Subnet: subnet, Names: map[string]string{}}
	for _, n := range s.Nodes {
		d.Names[n.Name] = n.Address
	}
	return d, nil
}

var (
	defaultOnce   sync.Once
	defaultDialer *Dialer
	defaultErr    error
)

// DialContext dials from the default lab's gateway namespace (the lab in
// $HOMELAB_LAB_DIR or DefaultDir).
func DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	defaultOnce.Do(func() {
		var l *Lab
		if l, defaultErr = Open(""); defaultErr == nil {
			defaultDialer, defaultErr = l.Dialer()
		}
	})
	if defaultErr != nil {
		return nil, defaultErr
	}
	return defaultDialer.DialContext(ctx, network, addr)
}

// DialContext connects to addr (an IP literal or a node name, with port)
// from inside the lab. Names are never resolved by DNS: a lookup would run
// on other threads, in the machine's namespace, against its real resolver.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if a, ok := d.Names[host]; ok {
		host = a
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("lab dialer: %q is neither an IP address nor a lab node", host)
	}
	if d.Subnet != nil && !d.Subnet.Contains(ip) {
		return nil, fmt.Errorf("lab dialer: %s is outside the lab subnet %s", ip, d.Subnet)
	}
	if d.Netns == "" {
		return nil, fmt.Errorf("lab dialer: no namespace to dial from")
	}
	var conn net.Conn
	err = inNetns(d.Netns, func() error {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		conn = c
		return err
	})
	return conn, err
}

// Dial is DialContext without a context.
func (d *Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}
