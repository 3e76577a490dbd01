package kubelet

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fallbackRuntimeVersion is reported while the CRI endpoint does not answer.
const fallbackRuntimeVersion = "homelab-cri-standin://0.1"

// runtimeVersion asks the CRI endpoint for "name://version" until it gets an
// answer, then remembers it.
type runtimeVersion struct {
	endpoint string
	mu       sync.Mutex
	known    string
}

func (r *runtimeVersion) get(ctx context.Context) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known != "" {
		return r.known
	}
	v, err := criVersion(ctx, r.endpoint)
	if err != nil {
		return fallbackRuntimeVersion
	}
	r.known = v
	return v
}

func criVersion(ctx context.Context, endpoint string) (string, error) {
	target := endpoint
	if !strings.Contains(target, "://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", err
	}
	return resp.RuntimeName + "://" + resp.RuntimeVersion, nil
}
