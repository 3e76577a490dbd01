package kubelet

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/nodestatus"
)

// fallbackRuntimeVersion is reported while the CRI endpoint does not answer.
const fallbackRuntimeVersion = "homelab-cri-standin://1.7.28"

// runtimeInterval is how often the kubelet asks the runtime for its status
// (the kubelet's updateRuntimeUp period).
const runtimeInterval = 5 * time.Second

// runtimeClient is the kubelet's connection to the CRI endpoint, and what
// the runtime last said about itself.
type runtimeClient struct {
	endpoint string
	conn     *grpc.ClientConn
	rt       runtimeapi.RuntimeServiceClient

	mu      sync.Mutex
	version string
	state   nodestatus.Runtime
	// changed is signalled when the Ready condition the state gives changes.
	changed chan struct{}
}

func newRuntimeClient(endpoint string) (*runtimeClient, error) {
	target := endpoint
	if !strings.Contains(target, "://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &runtimeClient{endpoint: endpoint, conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn), changed: make(chan struct{}, 1)}, nil
}

func (r *runtimeClient) Close() error { return r.conn.Close() }

// Version returns "name://version", remembered once known.
func (r *runtimeClient) Version(ctx context.Context) string {
	r.mu.Lock()
	v := r.version
	r.mu.Unlock()
	if v != "" {
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := r.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return fallbackRuntimeVersion
	}
	v = resp.RuntimeName + "://" + resp.RuntimeVersion
	r.mu.Lock()
	r.version = v
	r.mu.Unlock()
	return v
}

// State is the runtime's last reported status.
func (r *runtimeClient) State() nodestatus.Runtime {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// watch asks the runtime for its status every interval until ctx ends.
func (r *runtimeClient) watch(ctx context.Context, interval time.Duration, logf func(string, ...any)) {
	if interval <= 0 {
		interval = runtimeInterval
	}
	var last string
	for {
		r.sync(ctx)
		st := r.State()
		_, _, msg := nodestatus.Ready(st, time.Now())
		if msg != last {
			if last != "" || msg != "kubelet is posting ready status" {
				logf("runtime: %s", msg)
			}
			last = msg
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// sync is the kubelet's updateRuntimeUp: a failed call changes nothing (the
// last sync ages until the runtime counts as down); the network's state is
// taken from every answer; the sync time only from a ready runtime.
func (r *runtimeClient) sync(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := r.rt.Status(cctx, &runtimeapi.StatusRequest{})
	if err != nil || resp.GetStatus() == nil {
		return
	}
	cond := func(t string) *nodestatus.RuntimeCondition {
		for _, c := range resp.GetStatus().GetConditions() {
			if c.GetType() == t {
				return &nodestatus.RuntimeCondition{Type: c.GetType(), Status: c.GetStatus(), Reason: c.GetReason(), Message: c.GetMessage()}
			}
		}
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.Answered = true
	r.state.NetworkReady = cond(runtimeapi.NetworkReady)
	r.state.RuntimeReady = cond(runtimeapi.RuntimeReady)
	if r.state.RuntimeReady != nil && r.state.RuntimeReady.Status {
		r.state.LastSync = time.Now()
	}
}
