package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/homelab-dev/homelab/roles/pki"
)

// watch probes etcd with a linearizable read through the members that
// stay put every 500 ms, and /readyz through the VIP every 200 ms, until
// stopped. The API probes do not wait for each other: one slow answer on
// a loaded machine must not hide, or stand for, the answers around it.
// A probe fails when refused, cut off, answered other than 200, or not
// answered within apiProbeTimeout; answers slower than slowAnswer are
// counted apart. On the lab's two cores, a renewal's kubeadm runs and
// component restarts on three nodes at once starve the apiservers of CPU:
// CI saw every /readyz take over 2 s for about 2 s, answered all the same.
type watch struct {
	mu                  sync.Mutex
	etcdFail, probes    int
	api                 []apiSample
	apiFail             int
	longestAPI, slowAPI time.Duration
	slowAnswers         int
	// failures names the first failed API probes, for the log.
	failures []string
	stop     chan struct{}
	done     sync.WaitGroup
}

const (
	apiProbeTimeout = 5 * time.Second
	slowAnswer      = 2 * time.Second
)

// apiSample is one /readyz probe: when it was sent, how long it took,
// and whether it was answered 200.
type apiSample struct {
	at   time.Time
	took time.Duration
	ok   bool
}

// longestFailure is the longest time the API failed every probe sent:
// from the first failed probe of a run to the next probe that succeeded
// (or the last probe sent, if none did). Probes are ordered by when they
// were sent, whatever order they were answered in.
func longestFailure(samples []apiSample) time.Duration {
	s := slices.Clone(samples)
	slices.SortFunc(s, func(a, b apiSample) int { return a.at.Compare(b.at) })
	var longest time.Duration
	var from time.Time
	for i, p := range s {
		switch {
		case !p.ok && from.IsZero():
			from = p.at
		case p.ok && !from.IsZero():
			longest, from = max(longest, p.at.Sub(from)), time.Time{}
		}
		if i == len(s)-1 && !from.IsZero() {
			longest = max(longest, p.at.Add(p.took).Sub(from))
		}
	}
	return longest
}

func (e *e2e) watch(ctx context.Context, b *pki.Bundle, vip string, etcdEPs []string) *watch {
	w := &watch{stop: make(chan struct{})}
	crt, key, err := pki.ClientCert(b.Talos.Certs.Etcd.Crt, b.Talos.Certs.Etcd.Key, "test", "system:masters", time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(crt, key)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.Talos.Certs.Etcd.Crt)
	dial := e.lab.Dial
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdEPs, DialTimeout: 3 * time.Second,
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dial(ctx, "tcp", a)
		})}})
	if err != nil {
		e.t.Fatal(err)
	}
	kpool := x509.NewCertPool()
	kpool.AppendCertsFromPEM(b.Talos.Certs.K8s.Crt)
	hc := &http.Client{Timeout: apiProbeTimeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: kpool, ServerName: vip}}}
	url := "https://" + net.JoinHostPort(vip, "6443") + "/readyz"
	w.done.Add(2)
	go func() {
		defer w.done.Done()
		defer cli.Close()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Get(rctx, "/registry/namespaces/default")
			cancel()
			w.mu.Lock()
			w.probes++
			if err != nil {
				w.etcdFail++
			}
			w.mu.Unlock()
		}
	}()
	go func() {
		defer w.done.Done()
		var sent sync.WaitGroup
		defer sent.Wait()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			sent.Add(1)
			go func(at time.Time) {
				defer sent.Done()
				resp, err := hc.Get(url)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					resp.Body.Close()
					if !ok {
						err = fmt.Errorf("HTTP %d", resp.StatusCode)
					}
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				w.api = append(w.api, apiSample{at: at, took: time.Since(at), ok: ok})
				if !ok && len(w.failures) < 5 {
					w.failures = append(w.failures, at.Format("15:04:05.000")+" "+err.Error())
				}
			}(time.Now())
		}
	}()
	return w
}

// end stops the probes and sums up the API's.
func (w *watch) end() {
	close(w.stop)
	w.done.Wait()
	w.longestAPI = longestFailure(w.api)
	for _, s := range w.api {
		if !s.ok {
			w.apiFail++
		}
		if s.ok {
			w.slowAPI = max(w.slowAPI, s.took)
			if s.took > slowAnswer {
				w.slowAnswers++
			}
		}
	}
}

// String is the figures a test logs.
func (w *watch) String() string {
	s := fmt.Sprintf("%d /readyz probes through the VIP: %d failed (longest failure %s), %d answered after more than %s (slowest %s); %d linearizable etcd reads: %d failed",
		len(w.api), w.apiFail, w.longestAPI.Round(time.Millisecond), w.slowAnswers, slowAnswer, w.slowAPI.Round(time.Millisecond), w.probes, w.etcdFail)
	if len(w.failures) > 0 {
		s += "; first failures: " + strings.Join(w.failures, "; ")
	}
	return s
}

func TestLongestFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(ms int, took int, ok bool) apiSample {
		return apiSample{at: t0.Add(time.Duration(ms) * time.Millisecond), took: time.Duration(took) * time.Millisecond, ok: ok}
	}
	for _, tc := range []struct {
		name    string
		samples []apiSample
		want    time.Duration
	}{
		{"none", nil, 0},
		{"all answered", []apiSample{at(0, 5, true), at(200, 5, true)}, 0},
		// A probe that timed out while the ones sent after it were
		// answered: the API failed for one probe's interval only.
		{"one slow probe among answered ones", []apiSample{at(0, 5, true), at(200, 2000, false), at(400, 5, true), at(600, 5, true)}, 200 * time.Millisecond},
		{"a refused run", []apiSample{at(0, 5, true), at(200, 1, false), at(400, 1, false), at(600, 1, false), at(800, 5, true)}, 600 * time.Millisecond},
		{"the longer of two runs", []apiSample{at(0, 1, false), at(200, 5, true), at(400, 1, false), at(600, 1, false), at(800, 1, false), at(1000, 5, true)}, 600 * time.Millisecond},
		// Answered out of order: the order they were sent in counts.
		{"answered out of order", []apiSample{at(400, 5, true), at(0, 5, true), at(200, 1, false)}, 200 * time.Millisecond},
		{"failing until the end", []apiSample{at(0, 5, true), at(200, 1, false), at(400, 2000, false)}, 2200 * time.Millisecond},
	} {
		if got := longestFailure(tc.samples); got != tc.want {
			t.Errorf("%s: longestFailure = %s, want %s", tc.name, got, tc.want)
		}
	}
}
