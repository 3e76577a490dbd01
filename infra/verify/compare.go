package verify

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeploymentDiff is what differs between two Deployments of the same
// shape made by two paths (a create and a server-side apply): the spec,
// compared with every value naming the object itself (its app label)
// taken as equal; the field managers recorded in managedFields; the
// annotations.
type DeploymentDiff struct {
	A, B string
	// SpecDiff lists the spec fields whose values differ, as dotted paths.
	SpecDiff []string
	// Managers are "manager/Operation", with "[subresource]" when the entry
	// is a subresource's: only on A, only on B, on both.
	ManagersA, ManagersB, ManagersBoth []string
	// Annotations are "key=value": only on A, only on B, on both with the
	// same value; AnnotationsDiffer are the keys on both with different
	// values.
	AnnotationsA, AnnotationsB, AnnotationsBoth, AnnotationsDiffer []string
}

// CompareDeployments compares a and b.
func CompareDeployments(a, b *appsv1.Deployment) DeploymentDiff {
	d := DeploymentDiff{A: a.Name, B: b.Name}
	d.SpecDiff = leafDiff("spec", specOf(a), specOf(b))
	d.ManagersA, d.ManagersB, d.ManagersBoth = partition(managers(a.ManagedFields), managers(b.ManagedFields))
	var ka, kb []string
	for k, v := range a.Annotations {
		if bv, ok := b.Annotations[k]; ok && bv != v {
			d.AnnotationsDiffer = append(d.AnnotationsDiffer, k)
			continue
		}
		ka = append(ka, k+"="+v)
	}
	for k, v := range b.Annotations {
		if av, ok := a.Annotations[k]; !ok || av == v {
			kb = append(kb, k+"="+v)
		}
	}
	sort.Strings(d.AnnotationsDiffer)
	d.AnnotationsA, d.AnnotationsB, d.AnnotationsBoth = partition(ka, kb)
	return d
}

// HasManager reports whether m (as in Managers) is recorded on side a
// (true) or b (false), alone or on both.
func (d DeploymentDiff) HasManager(a bool, m string) bool {
	own := d.ManagersB
	if a {
		own = d.ManagersA
	}
	return slices.Contains(own, m) || slices.Contains(d.ManagersBoth, m)
}

// String is the report's one-line account of the differences.
func (d DeploymentDiff) String() string {
	var parts []string
	if len(d.SpecDiff) == 0 {
		parts = append(parts, "same spec")
	} else {
		parts = append(parts, "specs differ in "+strings.Join(d.SpecDiff, ", "))
	}
	sides := func(what string, a, b, both []string) string {
		return fmt.Sprintf("%s only on %s: %s, only on %s: %s, on both: %s", what, d.A, orNone(a), d.B, orNone(b), orNone(both))
	}
	parts = append(parts, sides("field managers", d.ManagersA, d.ManagersB, d.ManagersBoth))
	ann := sides("annotations", d.AnnotationsA, d.AnnotationsB, d.AnnotationsBoth)
	if len(d.AnnotationsDiffer) > 0 {
		ann += ", with different values: " + strings.Join(d.AnnotationsDiffer, " ")
	}
	return strings.Join(append(parts, ann), "; ")
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, " ")
}

func managers(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		m := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			m += "[" + e.Subresource + "]"
		}
		out = append(out, m)
	}
	return out
}

// partition sorts a and b into what only a has, only b has, and both have.
func partition(a, b []string) (onlyA, onlyB, both []string) {
	for _, s := range a {
		if slices.Contains(b, s) {
			both = append(both, s)
		} else {
			onlyA = append(onlyA, s)
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			onlyB = append(onlyB, s)
		}
	}
	for _, l := range []*[]string{&onlyA, &onlyB, &both} {
		sort.Strings(*l)
		*l = slices.Compact(*l)
	}
	return onlyA, onlyB, both
}

// specOf is the Deployment's spec as JSON values, with every string equal
// to the object's name (`kubectl create deployment NAME` labels its pods
// app=NAME) replaced by a placeholder.
func specOf(d *appsv1.Deployment) any {
	data, _ := json.Marshal(d.Spec)
	var v any
	_ = json.Unmarshal(data, &v)
	var rename func(v any) any
	rename = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				t[k] = rename(x)
			}
		case []any:
			for i, x := range t {
				t[i] = rename(x)
			}
		case string:
			if t == d.Name {
				return "<name>"
			}
		}
		return v
	}
	return rename(v)
}

// leafDiff lists the paths below at where a and b differ.
func leafDiff(at string, a, b any) []string {
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if !okA || !okB {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{at}
	}
	keys := map[string]bool{}
	for k := range ma {
		keys[k] = true
	}
	for k := range mb {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		out = append(out, leafDiff(at+"."+k, ma[k], mb[k])...)
	}
	sort.Strings(out)
	return out
}
