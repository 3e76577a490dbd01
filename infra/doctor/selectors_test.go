package doctor

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func pod(ns, name, ip string, l map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if ip != "" {
		p.Status.Phase, p.Status.PodIP = corev1.PodRunning, ip
	}
	return p
}

func service(ns, name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: sel}}
}

func endpointSlice(ns, service string, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-x1", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return es
}

var nginxLabels = map[string]string{"app": "nginx", "pod-template-hash": "7c5ddbdf54"}

func findingsAt(r *Report, where string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Where == where {
			out = append(out, f)
		}
	}
	return out
}

// The seed's silent outage: a Service created fine whose selector has a
// typo. doctor names it, with the labels it meant; the correct one is not
// reported.
func TestDoctorNamesAServiceSelectingNothing(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		pod("default", "nginx-7c5ddbdf54-x2x4q", "10.244.1.5", nginxLabels),
		pod("default", "nginx-7c5ddbdf54-9kq7z", "10.244.2.7", nginxLabels),
		service("default", "web", map[string]string{"app": "ngnix"}),
		service("default", "web-ok", map[string]string{"app": "nginx"}),
		endpointSlice("default", "web-ok", "10.244.1.5", "10.244.2.7"),
		service("default", "kubernetes", nil),
	)
	d := &doctor{r: &Report{}}
	d.checkSelectors(context.Background(), cs)
	got := findingsAt(d.r, "service default/web")
	if len(got) != 1 || got[0].Status != Fail || got[0].Check != "selector" {
		t.Fatalf("service default/web: %+v (all: %+v)", got, d.r.Findings)
	}
	for _, w := range []string{"selector app=ngnix", "selects no pod", "closest labels app=nginx", "2 pods", "2 edits away", "no endpoints"} {
		if !strings.Contains(got[0].Detail, w) {
			t.Errorf("detail %q lacks %q", got[0].Detail, w)
		}
	}
	if f := findingsAt(d.r, "service default/web-ok"); len(f) > 0 {
		t.Errorf("the correct Service reported: %+v", f)
	}
	if len(d.r.Findings) != 1 || d.r.OK() {
		t.Errorf("findings %+v, report ok %v", d.r.Findings, d.r.OK())
	}
	if len(d.r.Causes) != 1 || !strings.Contains(d.r.Causes[0], "service default/web's selector app=ngnix selects no pod (the closest labels are app=nginx: a typo?)") {
		t.Errorf("causes %q", d.r.Causes)
	}

	healthy := fake.NewClientset(pod("default", "nginx-1", "10.244.1.5", nginxLabels), service("default", "web-ok", map[string]string{"app": "nginx"}), endpointSlice("default", "web-ok", "10.244.1.5"))
	d = &doctor{r: &Report{}}
	d.checkSelectors(context.Background(), healthy)
	if len(d.r.Findings) != 1 || d.r.Findings[0].Status != OK || d.r.Findings[0].Where != "cluster" || !strings.Contains(d.r.Findings[0].Detail, "1 services") {
		t.Errorf("a healthy cluster: %+v", d.r.Findings)
	}
}

func TestJudgeSelectors(t *testing.T) {
	nginx := pod("default", "nginx-1", "10.244.1.5", nginxLabels)
	pending := pod("default", "nginx-1", "", nginxLabels)
	dns := pod("kube-system", "coredns-1", "", map[string]string{"k8s-app": "kube-dns"})
	done := pod("default", "job-1", "10.244.1.9", map[string]string{"app": "batch"})
	done.Status.Phase = corev1.PodSucceeded
	ns := func(name string, l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	sel := func(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }
	pdb := func(s *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: s}}
	}
	netpol := func(pods map[string]string, from ...networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "allow"}, Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: pods}}}
		if len(from) > 0 {
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: from}}
		}
		return np
	}
	deployment := func(name string, replicas int32, selector, template map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Generation: 1},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: sel(selector),
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1}}
	}
	type row struct {
		where  string
		status Status
		says   []string
	}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want []row // and nothing else
	}{
		{name: "pods selected but not running: a warning, not a typo",
			objs: []runtime.Object{dns, service("kube-system", "kube-dns", map[string]string{"k8s-app": "kube-dns"})},
			want: []row{{"service kube-system/kube-dns", Warn, []string{"selects 1 pods", "none has an address yet", "no endpoints"}}}},
		{name: "an ExternalName Service selects nothing by design",
			objs: []runtime.Object{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, Selector: map[string]string{"app": "x"}}}}},
		{name: "finished pods are not selected; no pod at all in the namespace",
			objs: []runtime.Object{done, service("default", "batch", map[string]string{"app": "batch"})},
			want: []row{{"service default/batch", Fail, []string{"selects no pod", "no pod runs in namespace default"}}}},
		{name: "the right labels in the wrong namespace",
			objs: []runtime.Object{dns, service("default", "dns", map[string]string{"k8s-app": "kube-dns"})},
			want: []row{{"service default/dns", Fail, []string{"selects no pod", "pods in namespace kube-system match it"}}}},
		{name: "a Deployment scaled to zero: a warning",
			objs: []runtime.Object{deployment("nginx", 0, map[string]string{"app": "nginx"}, map[string]string{"app": "nginx"}), service("default", "web", map[string]string{"app": "nginx"})},
			want: []row{{"service default/web", Warn, []string{"deployment default/nginx, scaled to 0"}}}},
		{name: "a PDB with a typo, one without a selector, one that matches",
			objs: []runtime.Object{pending, pdb(sel(map[string]string{"app": "ngnix"})),
				func() runtime.Object { p := pdb(nil); p.Name = "none"; return p }(),
				func() runtime.Object { p := pdb(sel(map[string]string{"app": "nginx"})); p.Name = "ok"; return p }()},
			want: []row{
				{"pdb default/web", Fail, []string{"selector app=ngnix selects no pod", "closest labels app=nginx", "protects nothing"}},
				{"pdb default/none", Fail, []string{"has no selector"}},
			}},
		{name: "a NetworkPolicy: its podSelector, a peer's podSelector, a peer's namespaceSelector",
			objs: []runtime.Object{nginx, ns("default", map[string]string{"kubernetes.io/metadata.name": "default"}), ns("monitoring", map[string]string{"team": "obs"}),
				netpol(map[string]string{"app": "nginxx"}),
				func() runtime.Object {
					np := netpol(map[string]string{"app": "nginx"},
						networkingv1.NetworkPolicyPeer{PodSelector: sel(map[string]string{"role": "frontend"})},
						networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(map[string]string{"team": "ops"})},
						networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(map[string]string{"team": "obs"})}, // selects monitoring: fine
						networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})                     // every pod: fine
					np.Name = "peers"
					return np
				}(),
				func() runtime.Object { np := netpol(nil); np.Name = "default-deny"; return np }()},
			want: []row{
				{"networkpolicy default/allow", Fail, []string{"podSelector app=nginxx selects no pod", "closest labels app=nginx", "1 edit away"}},
				{"networkpolicy default/peers", Fail, []string{"ingress[0].from[0].podSelector role=frontend selects no pod"}},
				{"networkpolicy default/peers", Fail, []string{"ingress[0].from[1].namespaceSelector team=ops selects no namespace", "closest labels team=obs (namespace monitoring"}},
			}},
		{name: "Deployments: none of its replicas exists (with the controller's reason); one unobserved; one with its pods",
			objs: []runtime.Object{nginx,
				func() runtime.Object {
					d := deployment("web", 2, map[string]string{"app": "web"}, map[string]string{"app": "web"})
					d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: `pods "web-1" is forbidden: violates PodSecurity "restricted:latest"`}}
					return d
				}(),
				func() runtime.Object {
					d := deployment("new", 1, map[string]string{"app": "new"}, map[string]string{"app": "new"})
					d.Generation = 2
					return d
				}(),
				deployment("nginx", 1, map[string]string{"app": "nginx"}, map[string]string{"app": "nginx"})},
			want: []row{{"deployment default/web", Fail, []string{"selector app=web selects no pod", "none of its 2 replicas exists", "FailedCreate: pods \"web-1\" is forbidden"}}}},
		{name: "a Deployment whose selector misses its own template (written around validation)",
			objs: []runtime.Object{deployment("web", 1, map[string]string{"app": "web"}, map[string]string{"app": "wbe"})},
			want: []row{{"deployment default/web", Fail, []string{"does not match its own pod template's labels app=wbe", "2 edits away"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := listSelectorObjects(context.Background(), fake.NewClientset(tc.objs...))
			if err != nil {
				t.Fatal(err)
			}
			findings, causes := judgeSelectors(o)
			fails := 0
			for _, w := range tc.want {
				found := false
				for _, f := range findings {
					if f.Where == w.where && f.Status == w.status && containsAll(f.Detail, w.says) {
						found = true
					}
				}
				if !found {
					t.Errorf("no %s row for %s saying %q in %+v", w.status, w.where, w.says, findings)
				}
				if w.status == Fail {
					fails++
				}
			}
			if len(findings) != len(tc.want) {
				t.Errorf("%d findings, want %d: %+v", len(findings), len(tc.want), findings)
			}
			if len(causes) != fails {
				t.Errorf("%d causes for %d failures: %q", len(causes), fails, causes)
			}
		})
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
