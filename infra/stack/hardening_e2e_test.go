package stack

import (
	"context"
	"strconv"
	"strings"

	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// checkHardening: every apiserver writes its audit log, in which a Secret
// written appears at Metadata, without its value; profiling is off on
// every control-plane component, and the apiserver serves no profile;
// anonymous requests reach only what health checks and joins need.
func (e *e2e) checkHardening(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	const kubectl = "kubectl --kubeconfig " + nodefacts.AdminConf
	const value = "audit-probe-value-never-logged"
	e.node(ctx, "cp-1", kubectl+" -n default create secret generic audit-probe --from-literal=v="+value)
	defer e.node(ctx, "cp-1", kubectl+" -n default delete secret audit-probe --ignore-not-found")
	logged := false
	for _, cp := range s.Inv.ControlPlanes() {
		lines, _ := strconv.Atoi(strings.TrimSpace(e.node(ctx, cp.Name, "cat "+kubeadm.AuditLog+" | wc -l")))
		if lines == 0 {
			t.Errorf("%s: no audit log at %s", cp.Name, kubeadm.AuditLog)
		}
		out := e.node(ctx, cp.Name, "grep -h audit-probe "+kubeadm.AuditLog+" || true")
		if strings.Contains(out, value) {
			t.Errorf("%s: the audit log holds a Secret's value:\n%s", cp.Name, out)
		}
		if strings.Contains(out, `"level":"Metadata"`) && strings.Contains(out, `"verb":"create"`) {
			logged = true
		}
		manifests := e.node(ctx, cp.Name, "cat "+nodefacts.ManifestsDir+"/kube-apiserver.yaml "+nodefacts.ManifestsDir+"/kube-controller-manager.yaml "+nodefacts.ManifestsDir+"/kube-scheduler.yaml")
		if n := strings.Count(manifests, "--profiling=false"); n != 3 {
			t.Errorf("%s: --profiling=false in %d of the 3 control-plane manifests", cp.Name, n)
		}
	}
	if !logged {
		t.Error("creating a Secret left no Metadata entry in any apiserver's audit log")
	}
	if out, err := e.lab.Run(ctx, "cp-1", kubectl+" get --raw /debug/pprof/ 2>&1"); err == nil || !strings.Contains(out, "NotFound") && !strings.Contains(out, "could not find") {
		t.Errorf("the apiserver serves /debug/pprof/: %v\n%s", err, out)
	}
	// Anonymous requests: the health endpoints and cluster-info (kubeadm
	// join's discovery) answer; anything else is refused as
	// unauthenticated (401), not merely unauthorized (403).
	for path, want := range map[string]string{"/livez": "200", "/readyz": "200", "/api/v1/namespaces/kube-public/configmaps/cluster-info": "200",
		"/api": "401", "/version": "401", "/api/v1/namespaces/kube-public/configmaps": "401"} {
		got := e.node(ctx, "cp-1", "curl -s -o /dev/null -w '%{http_code}' --cacert "+nodefacts.PKIDir+"/ca.crt https://127.0.0.1:"+strconv.Itoa(s.Inv.Cluster.Endpoint.APIPort())+path)
		if strings.TrimSpace(got) != want {
			t.Errorf("an anonymous GET %s: HTTP %s, want %s", path, got, want)
		}
	}
}
