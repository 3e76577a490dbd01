package verify

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, sub string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, APIVersion: "apps/v1"}
}

// served is a Deployment as the API returns it after the controllers
// acted: defaulted, with the revision annotation and their entries.
func served(name string, m ...metav1.ManagedFieldsEntry) *appsv1.Deployment {
	d := imperative(DefaultPractice())
	d.Name = name
	l := map[string]string{"app": name}
	d.Labels, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels = l, l, l
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	d.ManagedFields = append(m,
		entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, ""),
		entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status"))
	return d
}

func TestCompareDeployments(t *testing.T) {
	created := entry(CreateManager, metav1.ManagedFieldsOperationUpdate, "")
	applied := entry(ApplyManager, metav1.ManagedFieldsOperationApply, "")
	for _, tc := range []struct {
		name    string
		a, b    *appsv1.Deployment
		edit    func(a, b *appsv1.Deployment)
		want    DeploymentDiff
		problem string // judgePaths' complaint, "" none
	}{
		{name: "the two paths: same spec, each its own manager, the controller's on both",
			a: served("imp", created), b: served("dec", applied),
			want: DeploymentDiff{ManagersA: []string{"homelab-verify-create/Update"}, ManagersB: []string{"homelab-verify/Apply"},
				ManagersBoth:    []string{"kube-controller-manager/Update", "kube-controller-manager/Update[status]"},
				AnnotationsBoth: []string{"deployment.kubernetes.io/revision=1"}}},
		{name: "a different replica count is a spec difference",
			a: served("imp", created), b: served("dec", applied),
			edit: func(a, b *appsv1.Deployment) { b.Spec.Replicas = ptr.To[int32](3) },
			want: DeploymentDiff{SpecDiff: []string{"spec.replicas"}, ManagersA: []string{"homelab-verify-create/Update"}, ManagersB: []string{"homelab-verify/Apply"},
				ManagersBoth:    []string{"kube-controller-manager/Update", "kube-controller-manager/Update[status]"},
				AnnotationsBoth: []string{"deployment.kubernetes.io/revision=1"}},
			problem: "specs differ in spec.replicas"},
		{name: "a label not naming the object is compared",
			a: served("imp", created), b: served("dec", applied),
			edit: func(a, b *appsv1.Deployment) {
				a.Spec.Template.Labels = map[string]string{"app": "imp", "tier": "web"}
				b.Spec.Template.Labels = map[string]string{"app": "dec", "tier": "db"}
			},
			want: DeploymentDiff{SpecDiff: []string{"spec.template.metadata.labels.tier"}, ManagersA: []string{"homelab-verify-create/Update"}, ManagersB: []string{"homelab-verify/Apply"},
				ManagersBoth:    []string{"kube-controller-manager/Update", "kube-controller-manager/Update[status]"},
				AnnotationsBoth: []string{"deployment.kubernetes.io/revision=1"}},
			problem: "tier"},
		{name: "client-side apply's annotation, a revision apart",
			a: served("imp", created), b: served("dec", entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, "")),
			edit: func(a, b *appsv1.Deployment) {
				b.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
				b.Annotations["deployment.kubernetes.io/revision"] = "2"
			},
			want: DeploymentDiff{ManagersA: []string{"homelab-verify-create/Update"}, ManagersB: []string{"kubectl-client-side-apply/Update"},
				ManagersBoth:      []string{"kube-controller-manager/Update", "kube-controller-manager/Update[status]"},
				AnnotationsB:      []string{"kubectl.kubernetes.io/last-applied-configuration={}"},
				AnnotationsDiffer: []string{"deployment.kubernetes.io/revision"}},
			problem: "dec has no homelab-verify/Apply entry"},
		{name: "an applied imperative side",
			a: served("imp", created, entry(ApplyManager, metav1.ManagedFieldsOperationApply, "")), b: served("dec", applied),
			want: DeploymentDiff{ManagersA: []string{"homelab-verify-create/Update"}, ManagersB: nil,
				ManagersBoth:    []string{"homelab-verify/Apply", "kube-controller-manager/Update", "kube-controller-manager/Update[status]"},
				AnnotationsBoth: []string{"deployment.kubernetes.io/revision=1"}},
			problem: "imp was never applied, yet records homelab-verify/Apply"},
		{name: "no create entry",
			a: served("imp"), b: served("dec", applied),
			want: DeploymentDiff{ManagersB: []string{"homelab-verify/Apply"},
				ManagersBoth:    []string{"kube-controller-manager/Update", "kube-controller-manager/Update[status]"},
				AnnotationsBoth: []string{"deployment.kubernetes.io/revision=1"}},
			problem: "imp has no homelab-verify-create/Update entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				tc.edit(tc.a, tc.b)
			}
			got := CompareDeployments(tc.a, tc.b)
			tc.want.A, tc.want.B = "imp", "dec"
			if !equalDiff(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			err := judgePaths(got)
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("judged a problem: %v", err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Errorf("judged %v, want a problem naming %q", err, tc.problem)
			}
		})
	}
}

func equalDiff(a, b DeploymentDiff) bool {
	return a.A == b.A && a.B == b.B && slices.Equal(a.SpecDiff, b.SpecDiff) &&
		slices.Equal(a.ManagersA, b.ManagersA) && slices.Equal(a.ManagersB, b.ManagersB) && slices.Equal(a.ManagersBoth, b.ManagersBoth) &&
		slices.Equal(a.AnnotationsA, b.AnnotationsA) && slices.Equal(a.AnnotationsB, b.AnnotationsB) &&
		slices.Equal(a.AnnotationsBoth, b.AnnotationsBoth) && slices.Equal(a.AnnotationsDiffer, b.AnnotationsDiffer)
}

func TestDeploymentDiffString(t *testing.T) {
	d := CompareDeployments(served("imp", entry(CreateManager, metav1.ManagedFieldsOperationUpdate, "")), served("dec", entry(ApplyManager, metav1.ManagedFieldsOperationApply, "")))
	s := d.String()
	for _, w := range []string{"same spec; ", "field managers only on imp: homelab-verify-create/Update, only on dec: homelab-verify/Apply, on both: kube-controller-manager/Update kube-controller-manager/Update[status]; ",
		"annotations only on imp: none, only on dec: none, on both: deployment.kubernetes.io/revision=1"} {
		if !strings.Contains(s, w) {
			t.Errorf("%q lacks %q", s, w)
		}
	}
}

// The imperative object and the declarative configuration are one
// Deployment, `kubectl create deployment`'s, apart from its name.
func TestBothPathsMakeTheSameDeployment(t *testing.T) {
	p := DefaultPractice()
	data, err := json.Marshal(declarative(p))
	if err != nil {
		t.Fatal(err)
	}
	var fromConfig appsv1.Deployment
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(data), DeclarativeName, ImperativeName)), &fromConfig); err != nil {
		t.Fatal(err)
	}
	if fromConfig.Kind != "Deployment" || fromConfig.APIVersion != "apps/v1" {
		t.Errorf("configuration's kind %s/%s", fromConfig.APIVersion, fromConfig.Kind)
	}
	fromConfig.TypeMeta = metav1.TypeMeta{}
	if imp := imperative(p); !apiequality.Semantic.DeepEqual(&fromConfig, imp) {
		t.Errorf("imperative %+v\ndeclarative %+v", imp, fromConfig)
	}
	c := fromConfig.Spec
	if c.Template.Spec.Containers[0].Name != "pause" || *c.Replicas != 2 || c.Selector.MatchLabels["app"] != ImperativeName || fromConfig.Labels["app"] != ImperativeName {
		t.Errorf("not kubectl create deployment's shape: %+v", fromConfig)
	}
}

func TestFirstSentence(t *testing.T) {
	for in, want := range map[string]string{
		"The maximum number of pods. Value can be 5.\nIntOrString is": "The maximum number of pods.",
		"One line\nsecond":  "One line",
		"Version 1.2 of it": "Version 1.2 of it",
	} {
		if got := firstSentence(in); got != want {
			t.Errorf("firstSentence(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChangedFields(t *testing.T) {
	before := served("dec")
	for _, tc := range []struct {
		name string
		edit func(d *appsv1.Deployment)
		want []string
	}{
		{"nothing", func(d *appsv1.Deployment) { d.ResourceVersion = "9"; d.Status.Replicas = 2 }, nil},
		{"replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }, []string{"spec.replicas"}},
		{"an annotation and a label", func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1", "x": "y"}
			d.Labels = map[string]string{"app": "dec", "tier": "web"}
		}, []string{"annotations.x", "labels.tier"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := before.DeepCopy()
			tc.edit(after)
			if got := changedFields(before, after); !slices.Equal(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}
