package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/restmapper"
)

// Practice is the seed's hands-on lab, asked of the cluster itself in
// Namespace: explain a field from the served OpenAPI v3 document; the same
// Deployment created imperatively (as `kubectl create deployment`) and
// declaratively (as `kubectl apply --server-side`), compared; a re-apply
// that changes nothing and a second create that is refused; a label
// selector that picks one Deployment's pods and not the other's. Both
// Deployments are deleted afterwards; the namespace stays.
type Practice struct {
	// Resource is named as `kubectl api-resources` lists it (NAME.GROUP,
	// a short name works too); FieldPath as `kubectl explain` takes it.
	Resource, FieldPath string
	// Image and Replicas of the Deployment both paths make.
	Image    string
	Replicas int32
	// Selector must pick exactly the imperative Deployment's pods.
	Selector string
	// Reapply edits the declarative configuration before it is applied
	// the second time (nil: applied unchanged).
	Reapply func(*appsv1ac.DeploymentApplyConfiguration)
}

// Names and field managers of the practice's objects. The managers stand
// where kubectl records "kubectl-create" and "kubectl".
const (
	ImperativeName  = "kcna-imperative"
	DeclarativeName = "kcna-declarative"
	CreateManager   = "homelab-verify-create"
	ApplyManager    = "homelab-verify"
	// PauseImage is kubeadm 1.34's sandbox image: tiny, likely on the node
	// already, does nothing, and ends at once on SIGTERM.
	PauseImage = "registry.k8s.io/pause:3.10.1"
)

// DefaultPractice is what `homelab verify` runs.
func DefaultPractice() Practice {
	return Practice{
		Resource:  "deployments.apps",
		FieldPath: "spec.strategy.rollingUpdate.maxSurge",
		Image:     PauseImage,
		Replicas:  2,
		Selector:  "app=" + ImperativeName,
	}
}

// RunPractice runs the practice's checks alone.
func RunPractice(ctx context.Context, t Target, p Practice) (*Report, error) {
	cs, err := clientset(t)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return rep, rep.add("namespace "+Namespace+" exists", err, "")
	}
	return rep, runPractice(ctx, cs, rep, p)
}

func runPractice(ctx context.Context, cs kubernetes.Interface, rep *Report, p Practice) (result error) {
	var errs *multierror.Error
	add := func(name string, err error, detail string) {
		errs = multierror.Append(errs, rep.add(name, err, detail))
	}

	f, err := explain(cs, p.Resource, p.FieldPath)
	detail := ""
	if err == nil {
		detail = fmt.Sprintf("%s %s: %s <%s>: %s", f.GVK.GroupVersion(), f.GVK.Kind, p.FieldPath, f.Type, firstSentence(f.Description))
	}
	add("the cluster explains "+p.Resource+" "+p.FieldPath+" from its OpenAPI v3 document (as kubectl explain)", err, detail)

	deploys := cs.AppsV1().Deployments(Namespace)
	if err := removePractice(ctx, cs); err != nil {
		add("no Deployment left in "+Namespace+" by an earlier run", err, "")
		return errs.ErrorOrNil()
	}
	defer func() {
		// The checks' own context may be spent; the cleanup still runs.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
		defer cancel()
		add(Namespace+" left as found: both Deployments deleted with their ReplicaSets and pods", removePractice(cctx, cs), "")
		result = errs.ErrorOrNil()
	}()

	_, err = deploys.Create(ctx, imperative(p), metav1.CreateOptions{FieldManager: CreateManager})
	if err == nil {
		_, err = deploys.Apply(ctx, declarative(p), metav1.ApplyOptions{FieldManager: ApplyManager})
	}
	if err != nil {
		add("Deployment "+ImperativeName+" created and "+DeclarativeName+" applied in "+Namespace, err, "")
		return errs.ErrorOrNil()
	}

	owned, settleErr := settle(ctx, cs, p.Replicas)
	imp, err1 := deploys.Get(ctx, ImperativeName, metav1.GetOptions{})
	dec, err2 := deploys.Get(ctx, DeclarativeName, metav1.GetOptions{})
	if err := firstErr(settleErr, err1, err2); err != nil {
		add(samePaths, err, "")
	} else {
		diff := CompareDeployments(imp, dec)
		add(samePaths, judgePaths(diff), diff.String())
	}

	detail, err = reapply(ctx, cs, p)
	add("re-applying "+DeclarativeName+" changes nothing", err, detail)

	_, err = deploys.Create(ctx, imperative(p), metav1.CreateOptions{FieldManager: CreateManager})
	switch {
	case apierrors.IsAlreadyExists(err):
		add("creating "+ImperativeName+" again is refused", nil, err.Error())
	case err == nil:
		add("creating "+ImperativeName+" again is refused", fmt.Errorf("the second create succeeded"), "")
	default:
		add("creating "+ImperativeName+" again is refused", fmt.Errorf("refused, but not as AlreadyExists: %w", err), "")
	}

	detail, err = checkPicks(ctx, cs, p.Selector, owned)
	add("label selector "+p.Selector+" picks exactly "+ImperativeName+"'s pods, none of "+DeclarativeName+"'s", err, detail)
	return errs.ErrorOrNil()
}

const samePaths = ImperativeName + " (created, as kubectl create deployment) and " + DeclarativeName +
	" (applied server-side, as kubectl apply --server-side) are the same Deployment"

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return strings.SplitN(s, "\n", 2)[0]
}

// explain resolves a resource the way kubectl does (discovery's REST
// mapping, short names expanded) and looks the field up in the served
// OpenAPI v3 document of its group-version.
func explain(cs kubernetes.Interface, resource, fieldPath string) (Field, error) {
	grs, err := restmapper.GetAPIGroupResources(cs.Discovery())
	if err != nil {
		return Field{}, fmt.Errorf("discovery: %w", err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDiscoveryRESTMapper(grs), cs.Discovery(), nil)
	full, gr := schema.ParseResourceArg(resource)
	var gvr schema.GroupVersionResource
	err = fmt.Errorf("no version")
	if full != nil {
		gvr, err = mapper.ResourceFor(*full)
	}
	if err != nil {
		if gvr, err = mapper.ResourceFor(gr.WithVersion("")); err != nil {
			return Field{}, fmt.Errorf("the cluster serves no resource %q: %w", resource, err)
		}
	}
	doc, err := openapi3.NewRoot(cs.Discovery().OpenAPIV3()).GVSpec(gvr.GroupVersion())
	if err != nil {
		return Field{}, fmt.Errorf("OpenAPI v3 document of %s: %w", gvr.GroupVersion(), err)
	}
	var path []string
	if fieldPath != "" {
		path = strings.Split(fieldPath, ".")
	}
	return Explain(doc, gvr, path)
}

// declarative is the configuration `kubectl create deployment NAME
// --image=IMAGE --replicas=N --dry-run=client -o yaml` writes, the
// manifest one applies.
func declarative(p Practice) *appsv1ac.DeploymentApplyConfiguration {
	return practiceConfig(DeclarativeName, p)
}

func practiceConfig(name string, p Practice) *appsv1ac.DeploymentApplyConfiguration {
	l := map[string]string{"app": name}
	container := p.Image[strings.LastIndex(p.Image, "/")+1:]
	container, _, _ = strings.Cut(container, ":")
	container, _, _ = strings.Cut(container, "@")
	return appsv1ac.Deployment(name, Namespace).
		WithLabels(l).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(p.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(l)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(l).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName(container).WithImage(p.Image)))))
}

// imperative is the object `kubectl create deployment` posts: the same
// configuration, as a typed object.
func imperative(p Practice) *appsv1.Deployment {
	c := practiceConfig(ImperativeName, p)
	spec := c.Spec
	ct := spec.Template.Spec.Containers[0]
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: *c.Name, Namespace: *c.Namespace, Labels: c.Labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: spec.Selector.MatchLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: spec.Template.Labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: *ct.Name, Image: *ct.Image}}},
			},
		},
	}
}

// judgePaths: each path leaves its own record, and they make one object.
func judgePaths(d DeploymentDiff) error {
	var problems []string
	if len(d.SpecDiff) > 0 {
		problems = append(problems, "the specs differ in "+strings.Join(d.SpecDiff, ", "))
	}
	if !d.HasManager(true, CreateManager+"/Update") {
		problems = append(problems, d.A+" has no "+CreateManager+"/Update entry in managedFields")
	}
	if !d.HasManager(false, ApplyManager+"/Apply") {
		problems = append(problems, d.B+" has no "+ApplyManager+"/Apply entry in managedFields")
	}
	for _, m := range append(slices.Clone(d.ManagersA), d.ManagersBoth...) {
		if strings.HasSuffix(m, "/Apply") {
			problems = append(problems, d.A+" was never applied, yet records "+m)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// ownedPods maps each Deployment to the names of the pods its
// ReplicaSets own.
func ownedPods(ctx context.Context, cs kubernetes.Interface) (map[string][]string, error) {
	rss, err := cs.AppsV1().ReplicaSets(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	rsOwner := map[string]string{}
	for _, rs := range rss.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
			rsOwner[rs.Name] = ref.Name
		}
	}
	pods, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "ReplicaSet" && rsOwner[ref.Name] != "" && p.DeletionTimestamp == nil {
			out[rsOwner[ref.Name]] = append(out[rsOwner[ref.Name]], p.Name)
		}
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out, nil
}

// settle waits until the controllers have acted on both Deployments: each
// observed, with its revision annotation and its pods created.
func settle(ctx context.Context, cs kubernetes.Interface, replicas int32) (map[string][]string, error) {
	var owned map[string][]string
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if owned, err = ownedPods(ctx, cs); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, name := range []string{ImperativeName, DeclarativeName} {
			d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if d.Status.ObservedGeneration < d.Generation || d.Annotations["deployment.kubernetes.io/revision"] == "" {
				last = name + " not yet observed by the deployment controller"
				return false, nil
			}
			if n := len(owned[name]); n != int(replicas) {
				last = fmt.Sprintf("%s has %d of %d pods", name, n, replicas)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return owned, fmt.Errorf("the controllers did not settle: %s%s", last, replicaFailure(context.WithoutCancel(ctx), cs))
	}
	return owned, nil
}

// replicaFailure is why a ReplicaSet could not create its pods (a
// missing service account, a quota, an admission refusal), if it says.
func replicaFailure(ctx context.Context, cs kubernetes.Interface) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rss, err := cs.AppsV1().ReplicaSets(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, rs := range rss.Items {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				return fmt.Sprintf(" (replicaset %s: %s: %s)", rs.Name, c.Reason, c.Message)
			}
		}
	}
	return ""
}

// reapply applies the declarative configuration again (edited by
// p.Reapply) and compares resourceVersion and generation. The controllers
// may write the object too (status, a pod becoming ready): a change the
// re-apply did not make, seen in neither the generation nor the apply
// manager's own managedFields entry, is measured again.
func reapply(ctx context.Context, cs kubernetes.Interface, p Practice) (string, error) {
	deploys := cs.AppsV1().Deployments(Namespace)
	cfg := declarative(p)
	if p.Reapply != nil {
		p.Reapply(cfg)
	}
	var detail string
	for attempt := 0; attempt < 3; attempt++ {
		before, err := quiet(ctx, cs, DeclarativeName)
		if err != nil {
			return "", err
		}
		after, err := deploys.Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: ApplyManager})
		if err != nil {
			return "", err
		}
		detail = fmt.Sprintf("resourceVersion %s -> %s, generation %d -> %d", before.ResourceVersion, after.ResourceVersion, before.Generation, after.Generation)
		if after.ResourceVersion == before.ResourceVersion && after.Generation == before.Generation {
			return detail, nil
		}
		changed := changedFields(before, after)
		if after.Generation != before.Generation || applyEntry(after) != applyEntry(before) || len(changed) > 0 {
			return "", fmt.Errorf("%s: the re-applied configuration changed %s", detail, orNone(changed))
		}
	}
	return "", fmt.Errorf("%s: the object kept changing under the re-apply", detail)
}

// changedFields lists what differs between two reads of one object: its
// labels, annotations and spec.
func changedFields(before, after *appsv1.Deployment) []string {
	view := func(d *appsv1.Deployment) any {
		data, _ := json.Marshal(map[string]any{"labels": d.Labels, "annotations": d.Annotations, "spec": d.Spec})
		var v any
		_ = json.Unmarshal(data, &v)
		return v
	}
	var out []string
	for _, p := range leafDiff("", view(before), view(after)) {
		out = append(out, strings.TrimPrefix(p, "."))
	}
	return out
}

func applyEntry(d *appsv1.Deployment) string {
	for _, e := range d.ManagedFields {
		if e.Manager == ApplyManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			fields := ""
			if e.FieldsV1 != nil {
				fields = string(e.FieldsV1.Raw)
			}
			return e.Time.String() + " " + fields
		}
	}
	return ""
}

// quiet returns the Deployment once two reads a second apart agree.
func quiet(ctx context.Context, cs kubernetes.Interface, name string) (*appsv1.Deployment, error) {
	var prev *appsv1.Deployment
	for i := 0; i < 15; i++ {
		d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if prev != nil && prev.ResourceVersion == d.ResourceVersion {
			return d, nil
		}
		prev = d
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return prev, nil
}

// checkPicks lists the pods selector picks and compares them with the
// imperative Deployment's own.
func checkPicks(ctx context.Context, cs kubernetes.Interface, selector string, owned map[string][]string) (string, error) {
	if _, err := labels.Parse(selector); err != nil {
		return "", err
	}
	list, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "", err
	}
	var got []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			got = append(got, p.Name)
		}
	}
	sort.Strings(got)
	want, other := owned[ImperativeName], owned[DeclarativeName]
	var theirs []string
	for _, g := range got {
		if slices.Contains(other, g) {
			theirs = append(theirs, g)
		}
	}
	switch {
	case len(want) == 0:
		return "", fmt.Errorf("%s has no pods to pick", ImperativeName)
	case !slices.Equal(got, want):
		return "", fmt.Errorf("picks [%s] (%d of %s's), want %s's [%s]", strings.Join(got, " "), len(theirs), DeclarativeName, ImperativeName, strings.Join(want, " "))
	}
	return fmt.Sprintf("%d pods, %s's (%s); none of %s's %d", len(got), ImperativeName, strings.Join(got, " "), DeclarativeName, len(other)), nil
}

// removePractice deletes both Deployments and waits until they, their
// ReplicaSets and their pods are gone.
func removePractice(ctx context.Context, cs kubernetes.Interface) error {
	bg := metav1.DeletePropagationBackground
	for _, name := range []string{ImperativeName, DeclarativeName} {
		if err := cs.AppsV1().Deployments(Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	sel := "app in (" + ImperativeName + "," + DeclarativeName + ")"
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, name := range []string{ImperativeName, DeclarativeName} {
			if _, err := cs.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, "deployment/"+name)
			}
		}
		rss, err := cs.AppsV1().ReplicaSets(Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		for _, rs := range rss.Items {
			left = append(left, "replicaset/"+rs.Name)
		}
		pods, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			left = append(left, "pod/"+p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("still in %s: %s", Namespace, strings.Join(left, " "))
	}
	return nil
}
