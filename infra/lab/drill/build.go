package drill

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
)

// LayoutInventory writes the inventory at path, switched to layout and
// validated in it, to dir, and returns the new file and the inventory. A
// layout the inventory cannot express is an error naming the field.
func LayoutInventory(path, layout, dir string) (string, *inventory.Inventory, error) {
	inv, _, err := inventory.Load(path)
	if err != nil {
		return "", nil, err
	}
	inv.Cluster.Endpoint.Layout = layout
	if _, err := inventory.Validate(inv); err != nil {
		return "", nil, fmt.Errorf("in the %s layout: %w", layout, err)
	}
	data, err := yaml.Marshal(inv)
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+"-"+layout+".yaml")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return "", nil, err
	}
	return out, inv, nil
}

// Build converges the lab's cluster to the inventory at invPath. A cluster
// built in another layout is destroyed first: kubeadm never re-issues
// kubeconfigs for a changed controlPlaneEndpoint, so the layouts cannot
// be compared on a converted cluster.
func Build(ctx context.Context, l *lab.Lab, invPath, stateDir string, progress io.Writer) (*stack.Stack, error) {
	s, err := stack.Open(ctx, stack.Options{Inventory: invPath, StateDir: stateDir, Progress: progress})
	if err != nil {
		return nil, err
	}
	first := s.Inv.ControlPlanes()[0].Name
	out, err := l.Run(ctx, first, "sed -n 's|^ *server: https://||p' /etc/kubernetes/admin.conf 2>/dev/null | head -1")
	if live := strings.TrimSpace(out); err == nil && live != "" && live != s.Inv.Endpoint() {
		fmt.Fprintf(progress, "the cluster was built with endpoint %s, not %s: destroying it first\n", live, s.Inv.Endpoint())
		if _, err := s.Destroy(ctx); err != nil {
			return nil, fmt.Errorf("destroying the %s cluster: %w", live, err)
		}
	}
	if _, err := s.Up(ctx, true); err != nil {
		return nil, err
	}
	return s, nil
}
