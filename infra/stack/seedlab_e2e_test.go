package stack

import (
	"context"
	"strings"
	"time"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/verify"
)

// checkSeedLab is issue 21's end-to-end part, on a cluster verify just
// passed: the seed's lab made to fail one check at a time (each failing
// alone, the others and the cleanup still passing), then doctor naming a
// Service whose selector has a typo, with the labels it meant.
func (e *e2e) checkSeedLab(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	outs, err := s.Outputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	target := verify.Target{Inventory: s.Inv, Bundle: s.Bundle, Kubeconfig: []byte(kc), Dial: e.lab.Dial}
	for _, tc := range []struct {
		name  string
		edit  func(*verify.Practice)
		fails string // the one check that must fail (a name prefix)
		says  string
	}{
		{"a wrong field path for explain", func(p *verify.Practice) { p.FieldPath = "spec.strategy.rollingUpdate.maxSurgee" },
			"the cluster explains", `"maxSurgee" does not exist`},
		{"a declarative re-apply that changes something", func(p *verify.Practice) {
			p.Reapply = func(d *appsv1ac.DeploymentApplyConfiguration) { d.Spec.WithReplicas(3) }
		}, "re-applying " + verify.DeclarativeName, "changed spec.replicas"},
		{"a selector matching the other Deployment", func(p *verify.Practice) { p.Selector = "app=" + verify.DeclarativeName },
			"label selector", "2 of " + verify.DeclarativeName + "'s"},
	} {
		p := verify.DefaultPractice()
		tc.edit(&p)
		start := time.Now()
		rep, err := verify.RunPractice(ctx, target, p)
		t.Logf("figures: seed's lab with %s: %s", tc.name, time.Since(start).Round(time.Millisecond))
		if err == nil {
			t.Errorf("%s: the practice passed", tc.name)
		}
		if rep == nil {
			t.Fatalf("%s: no report: %v", tc.name, err)
		}
		failed := 0
		for _, c := range rep.Checks {
			want := !strings.HasPrefix(c.Name, tc.fails)
			if c.OK != want {
				t.Errorf("%s: check %q ok=%v: %s", tc.name, c.Name, c.OK, c.Detail)
			}
			if !c.OK {
				failed++
				if !strings.Contains(c.Detail, tc.says) {
					t.Errorf("%s: %q says %q, want it to name %q", tc.name, c.Name, c.Detail, tc.says)
				}
			}
		}
		if failed != 1 || len(rep.Checks) != 6 {
			t.Errorf("%s: %d of %d checks failed, want 1 of 6", tc.name, failed, len(rep.Checks))
		}
	}
	if left := e.node(ctx, "cp-1", labKubectl+"-n "+verify.Namespace+" get deployments,replicasets,pods -o name"); strings.TrimSpace(left) != "" {
		t.Errorf("the practice left in %s:\n%s", verify.Namespace, left)
	}

	// The seed's silent outage, made by hand with kubectl: created fine,
	// selecting nothing.
	e.node(ctx, "cp-1", labKubectl+"-n "+verify.Namespace+` apply -f - <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: kcna-web, labels: {app: kcna-web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: kcna-web}}
  template:
    metadata: {labels: {app: kcna-web}}
    spec: {containers: [{name: pause, image: `+verify.PauseImage+`}]}
---
apiVersion: v1
kind: Service
metadata: {name: kcna-web}
spec: {selector: {app: kcna-web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: kcna-web-typo}
spec: {selector: {app: kcna-wbe}, ports: [{port: 80}]}
EOF`)
	defer e.node(ctx, "cp-1", labKubectl+"-n "+verify.Namespace+" delete deployment/kcna-web service/kcna-web service/kcna-web-typo --wait=false")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		out := e.node(ctx, "cp-1", labKubectl+"-n "+verify.Namespace+" get pods -l app=kcna-web -o name")
		if len(strings.Fields(out)) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcna-web's pods: %q", out)
		}
	}
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	var typo []doctor.Finding
	for _, f := range rep.Failed() {
		if f.Where == "service "+verify.Namespace+"/kcna-web-typo" {
			typo = append(typo, f)
		} else {
			t.Errorf("doctor failed %s %s: %s", f.Check, f.Where, f.Detail)
		}
	}
	if len(typo) != 1 || !strings.Contains(typo[0].Detail, "selector app=kcna-wbe selects no pod") || !strings.Contains(typo[0].Detail, "closest labels app=kcna-web (2 pods") {
		t.Errorf("doctor on the typo: %+v", typo)
	}
	if !causesMention(rep, "kcna-web-typo", "app=kcna-wbe", "app=kcna-web: a typo?") {
		t.Errorf("no cause names the typo: %q", rep.Causes)
	}
	for _, f := range rep.Findings {
		if f.Where == "service "+verify.Namespace+"/kcna-web" && f.Status == doctor.Fail {
			t.Errorf("the correct Service failed: %s", f.Detail)
		}
	}
}
