package doctor

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// selectorObjects are the objects whose selectors doctor judges and the
// pods and namespaces they may select.
type selectorObjects struct {
	pods        []corev1.Pod
	namespaces  []corev1.Namespace
	services    []corev1.Service
	slices      []discoveryv1.EndpointSlice
	pdbs        []policyv1.PodDisruptionBudget
	netpols     []networkingv1.NetworkPolicy
	deployments []appsv1.Deployment
}

func listSelectorObjects(ctx context.Context, cs kubernetes.Interface) (selectorObjects, error) {
	var o selectorObjects
	all := metav1.ListOptions{}
	pods, err := cs.CoreV1().Pods("").List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("pods: %w", err)
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("namespaces: %w", err)
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("services: %w", err)
	}
	eps, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("endpointslices: %w", err)
	}
	pdbs, err := cs.PolicyV1().PodDisruptionBudgets("").List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("poddisruptionbudgets: %w", err)
	}
	nps, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("networkpolicies: %w", err)
	}
	deps, err := cs.AppsV1().Deployments("").List(ctx, all)
	if err != nil {
		return o, fmt.Errorf("deployments: %w", err)
	}
	return selectorObjects{pods: pods.Items, namespaces: nss.Items, services: svcs.Items, slices: eps.Items,
		pdbs: pdbs.Items, netpols: nps.Items, deployments: deps.Items}, nil
}

// checkSelectors names the selectors that select nothing: the seed's
// silent outage, an object created fine that simply matches no pod.
func (d *doctor) checkSelectors(ctx context.Context, cs kubernetes.Interface) {
	o, err := listSelectorObjects(ctx, cs)
	if err != nil {
		d.r.add("selector", "api", Fail, "listing %v", err)
		return
	}
	findings, causes := judgeSelectors(o)
	for _, f := range findings {
		d.r.add(f.Check, f.Where, f.Status, "%s", f.Detail)
	}
	for _, c := range causes {
		d.r.cause("%s", c)
	}
	if len(findings) == 0 {
		d.r.add("selector", "cluster", OK, "every selector selects pods: %d services, %d pod disruption budgets, %d network policies, %d deployments",
			len(o.services), len(o.pdbs), len(o.netpols), len(o.deployments))
	}
}

// selecting pods are those a selector can still mean: not finished.
func live(p corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

type judge struct {
	o        selectorObjects
	byNS     map[string][]corev1.Pod
	findings []Finding
	causes   []string
}

// judgeSelectors examines every selector of o and returns a finding for
// each that selects nothing (or whose pods have no endpoints), and the
// causes in an operator's words.
func judgeSelectors(o selectorObjects) ([]Finding, []string) {
	j := &judge{o: o, byNS: map[string][]corev1.Pod{}}
	for _, p := range o.pods {
		if live(p) {
			j.byNS[p.Namespace] = append(j.byNS[p.Namespace], p)
		}
	}
	for _, s := range o.services {
		j.service(s)
	}
	for _, p := range o.pdbs {
		j.pdb(p)
	}
	for _, np := range o.netpols {
		j.networkPolicy(np)
	}
	for _, dep := range o.deployments {
		j.deployment(dep)
	}
	return j.findings, j.causes
}

func (j *judge) add(where string, st Status, format string, args ...any) {
	j.findings = append(j.findings, Finding{Check: "selector", Where: where, Status: st, Detail: fmt.Sprintf(format, args...)})
}

func matching(sel labels.Selector, pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// nothing is the detail of a selector that selects no pod of namespaces:
// the closest label set there, pods elsewhere that it would select, or a
// Deployment scaled to zero whose pods it means (then only a warning).
func (j *judge) nothing(sel labels.Selector, namespaces []string) (detail string, st Status, hint string) {
	var owners []string
	var sets []map[string]string
	for _, ns := range namespaces {
		for _, p := range j.byNS[ns] {
			owners = append(owners, p.Namespace+"/"+p.Name)
			sets = append(sets, p.Labels)
		}
		for _, dep := range j.o.deployments {
			if dep.Namespace == ns && dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0 && sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
				return fmt.Sprintf("selects no pod: it matches the pods of deployment %s/%s, scaled to 0", dep.Namespace, dep.Name), Warn, ""
			}
		}
	}
	detail = "selects no pod"
	if m, ok := closestLabels(sel, groupLabels(owners, sets)); ok {
		detail += "; " + m.describe("pod")
		if m.meant != "" {
			hint = " (the closest labels are " + m.meant + ": a typo?)"
		}
	} else {
		detail += "; no pod runs in namespace " + strings.Join(namespaces, ", ")
	}
	var elsewhere []string
	for _, p := range j.o.pods {
		if live(p) && !contains(namespaces, p.Namespace) && sel.Matches(labels.Set(p.Labels)) && !contains(elsewhere, p.Namespace) {
			elsewhere = append(elsewhere, p.Namespace)
		}
	}
	if len(elsewhere) > 0 {
		detail += "; pods in namespace " + strings.Join(elsewhere, ", ") + " match it (the wrong namespace?)"
		hint = " (pods in namespace " + strings.Join(elsewhere, ", ") + " match it: the wrong namespace?)"
	}
	return detail, Fail, hint
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (j *judge) service(s corev1.Service) {
	if s.Spec.Type == corev1.ServiceTypeExternalName || len(s.Spec.Selector) == 0 {
		return // endpoints managed by hand, or none needed
	}
	where := "service " + s.Namespace + "/" + s.Name
	sel := labels.SelectorFromSet(s.Spec.Selector)
	endpoints := 0
	for _, es := range j.o.slices {
		if es.Namespace == s.Namespace && es.Labels[discoveryv1.LabelServiceName] == s.Name {
			endpoints += len(es.Endpoints)
		}
	}
	pods := matching(sel, j.byNS[s.Namespace])
	switch {
	case len(pods) == 0:
		detail, st, hint := j.nothing(sel, []string{s.Namespace})
		j.add(where, st, "selector %s %s; no endpoints", sel, detail)
		if st == Fail {
			j.causes = append(j.causes, fmt.Sprintf("%s's selector %s selects no pod%s, so it has no endpoints and every connection to it fails: fix the selector or the pods' labels", where, sel, hint))
		}
	case endpoints == 0:
		addressed := 0
		for _, p := range pods {
			if p.Status.PodIP != "" {
				addressed++
			}
		}
		why := "none has an address yet (not running)"
		if addressed > 0 {
			why = fmt.Sprintf("%d with an address, yet its EndpointSlices list none (is the endpointslice controller running?)", addressed)
		}
		j.add(where, Warn, "selector %s selects %d pods, %s: no endpoints", sel, len(pods), why)
	}
}

func (j *judge) pdb(p policyv1.PodDisruptionBudget) {
	where := "pdb " + p.Namespace + "/" + p.Name
	if p.Spec.Selector == nil {
		j.add(where, Fail, "has no selector: it protects no pod")
		j.causes = append(j.causes, where+" has no selector: it protects no pod, and a drain may evict every replica at once")
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil {
		j.add(where, Fail, "invalid selector: %v", err)
		return
	}
	if sel.Empty() || len(matching(sel, j.byNS[p.Namespace])) > 0 {
		return
	}
	detail, st, hint := j.nothing(sel, []string{p.Namespace})
	j.add(where, st, "selector %s %s: it protects nothing", sel, detail)
	if st == Fail {
		j.causes = append(j.causes, fmt.Sprintf("%s's selector %s selects no pod%s: it protects nothing, and a drain may evict every replica at once: fix the selector", where, sel, hint))
	}
}

func (j *judge) networkPolicy(np networkingv1.NetworkPolicy) {
	where := "networkpolicy " + np.Namespace + "/" + np.Name
	own := []string{np.Namespace}
	if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil {
		j.add(where, Fail, "podSelector invalid: %v", err)
	} else if !sel.Empty() && len(matching(sel, j.byNS[np.Namespace])) == 0 {
		detail, st, hint := j.nothing(sel, own)
		j.add(where, st, "podSelector %s %s: the policy applies to nothing", sel, detail)
		if st == Fail {
			j.causes = append(j.causes, fmt.Sprintf("%s's podSelector %s selects no pod%s: the policy isolates nothing: fix the selector", where, sel, hint))
		}
	}
	peers := func(dir string, i int, list []networkingv1.NetworkPolicyPeer) {
		for k, peer := range list {
			j.peer(where, fmt.Sprintf("%s[%d].%s[%d]", dir, i, map[string]string{"ingress": "from", "egress": "to"}[dir], k), np.Namespace, peer)
		}
	}
	for i, r := range np.Spec.Ingress {
		peers("ingress", i, r.From)
	}
	for i, r := range np.Spec.Egress {
		peers("egress", i, r.To)
	}
}

// peer judges one rule peer: its namespaceSelector must select a
// namespace, its podSelector a pod in those namespaces.
func (j *judge) peer(where, at, ns string, peer networkingv1.NetworkPolicyPeer) {
	namespaces := []string{ns}
	if peer.NamespaceSelector != nil {
		nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			j.add(where, Fail, "%s.namespaceSelector invalid: %v", at, err)
			return
		}
		namespaces = nil
		var names []string
		var sets []map[string]string
		for _, n := range j.o.namespaces {
			names, sets = append(names, n.Name), append(sets, n.Labels)
			if nsSel.Matches(labels.Set(n.Labels)) {
				namespaces = append(namespaces, n.Name)
			}
		}
		if len(namespaces) == 0 {
			detail := "selects no namespace"
			if m, ok := closestLabels(nsSel, groupLabels(names, sets)); ok {
				detail += "; " + m.describe("namespace")
			}
			j.add(where, Fail, "%s.namespaceSelector %s %s: the rule matches no one", at, nsSel, detail)
			j.causes = append(j.causes, fmt.Sprintf("%s's %s.namespaceSelector %s selects no namespace: the traffic that rule is for is not matched: fix the selector or label the namespace", where, at, nsSel))
			return
		}
	}
	if peer.PodSelector == nil {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
	if err != nil {
		j.add(where, Fail, "%s.podSelector invalid: %v", at, err)
		return
	}
	if sel.Empty() {
		return
	}
	for _, n := range namespaces {
		if len(matching(sel, j.byNS[n])) > 0 {
			return
		}
	}
	detail, st, hint := j.nothing(sel, namespaces)
	j.add(where, st, "%s.podSelector %s %s: the rule matches no one", at, sel, detail)
	if st == Fail {
		j.causes = append(j.causes, fmt.Sprintf("%s's %s.podSelector %s selects no pod%s: the traffic that rule is for is not matched: fix the selector", where, at, sel, hint))
	}
}

func (j *judge) deployment(dep appsv1.Deployment) {
	where := "deployment " + dep.Namespace + "/" + dep.Name
	if dep.Spec.Selector == nil {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		j.add(where, Fail, "invalid selector: %v", err)
		return
	}
	// apps/v1 refuses such a Deployment; one written around validation
	// (or served by another API server) would never see its pods.
	if !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		m, _ := closestLabels(sel, []labelSet{{labels: dep.Spec.Template.Labels, owners: []string{"template"}}})
		j.add(where, Fail, "selector %s does not match its own pod template's labels %s (%d edits away)", sel, labels.Set(dep.Spec.Template.Labels), m.distance)
		j.causes = append(j.causes, fmt.Sprintf("%s's selector %s does not match its pod template's labels: it never sees its own pods", where, sel))
		return
	}
	replicas := int32(1)
	if dep.Spec.Replicas != nil {
		replicas = *dep.Spec.Replicas
	}
	if replicas == 0 || dep.Status.ObservedGeneration < dep.Generation || len(matching(sel, j.byNS[dep.Namespace])) > 0 {
		return // scaled down, not yet seen by its controller, or has pods
	}
	detail, _, _ := j.nothing(sel, []string{dep.Namespace})
	why := ""
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			why = "; " + c.Reason + ": " + c.Message
		}
	}
	j.add(where, Fail, "selector %s %s: none of its %d replicas exists%s", sel, detail, replicas, why)
	j.causes = append(j.causes, fmt.Sprintf("%s wants %d replicas and has no pod%s", where, replicas, why))
}
