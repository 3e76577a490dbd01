package stack

import (
	"context"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// Change is one step a preview plans: which resource, what operation.
type Change struct {
	Type string // e.g. homelab:index:File
	Name string // e.g. gpu-1:/etc/kubernetes/kubeadm/join.yaml
	Op   string // create, update, delete, replace, ...
	// Keys are the properties whose change causes the step.
	Keys []string
}

func (c Change) String() string {
	s := c.Op + " " + c.Type + " " + c.Name
	if len(c.Keys) > 0 {
		s += " (" + strings.Join(c.Keys, ", ") + ")"
	}
	return s
}

// PreviewChanges previews and returns every step other than "same", sorted.
func (s *Stack) PreviewChanges(ctx context.Context, refresh bool) ([]Change, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	ch := make(chan events.EngineEvent)
	done := make(chan []Change)
	go func() {
		var out []Change
		for ev := range ch {
			pre := ev.ResourcePreEvent
			if pre == nil || pre.Metadata.Op == apitype.OpSame || pre.Metadata.Op == apitype.OpRead || pre.Metadata.Op == apitype.OpRefresh {
				continue
			}
			m := pre.Metadata
			out = append(out, Change{Type: m.Type, Name: urnName(m.URN), Op: string(m.Op), Keys: m.Diffs})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
		done <- out
	}()
	opts := []optpreview.Option{optpreview.EventStreams(ch), optpreview.ProgressStreams(s.progress), optpreview.Diff()}
	if refresh {
		opts = append(opts, optpreview.Refresh())
	}
	_, err := s.s.Preview(ctx, opts...)
	changes := <-done
	return changes, err
}

func urnName(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}
