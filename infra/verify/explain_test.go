package verify

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
)

// testdata/apps_v1_openapi.json is kube-apiserver v1.34.4's
// /openapi/v3/apis/apps/v1 (k8s.io/kubernetes api/openapi-spec/v3), cut
// with jq to the deployments path and the schemas a Deployment's
// strategy, selector, labels and containers are made of (some with fewer
// properties); every kept schema is the served one, unedited.
func appsV1(t *testing.T) *spec3.OpenAPI {
	t.Helper()
	data, err := os.ReadFile("testdata/apps_v1_openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(data, doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestExplain(t *testing.T) {
	doc := appsV1(t)
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, tc := range []struct {
		name, path string
		gvr        schema.GroupVersionResource
		typ        string
		desc       []string // in this order
		err        []string
	}{
		{name: "the seed's field: through two allOf references to IntOrString", path: "spec.strategy.rollingUpdate.maxSurge",
			typ: "IntOrString", desc: []string{"The maximum number of pods that can be scheduled above the desired number of pods.", "IntOrString is a type that can hold an int32 or a string."}},
		{name: "the kind itself", path: "", typ: "Object", desc: []string{"Deployment enables declarative updates for Pods and ReplicaSets."}},
		{name: "a plain field", path: "spec.replicas", typ: "integer", desc: []string{"Number of desired pods."}},
		{name: "an object field names its type", path: "spec.strategy", typ: "DeploymentStrategy", desc: []string{"The deployment strategy to use", "DeploymentStrategy describes"}},
		{name: "through array items", path: "spec.template.spec.containers.ports.containerPort", typ: "integer", desc: []string{"Number of port to expose on the pod's IP address."}},
		{name: "an array of objects", path: "spec.template.spec.containers", typ: "[]Container", desc: []string{"List of containers belonging to the pod.", "A single application container"}},
		{name: "a map", path: "spec.selector.matchLabels", typ: "map[string]string", desc: []string{"matchLabels is a map of {key,value} pairs."}},
		{name: "metadata's labels", path: "metadata.labels", typ: "map[string]string", desc: []string{"Map of string keys and values"}},
		{name: "a misspelt field, named with what exists", path: "spec.strategy.rollingUpdate.maxSurgee",
			err: []string{`"maxSurgee" does not exist`, "Deployment spec.strategy.rollingUpdate", "maxSurge, maxUnavailable"}},
		{name: "a misspelt first field", path: "sepc", err: []string{`"sepc"`, "in Deployment (", "spec"}},
		{name: "below a scalar", path: "spec.replicas.value", err: []string{`"value" does not exist`, "no fields"}},
		{name: "a type the document lacks", path: "status.replicas", err: []string{`"replicas" does not exist`}},
		{name: "a resource the document does not serve", path: "spec", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deploymentz"},
			err: []string{"serves no resource", "deploymentz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := tc.gvr
			if gvr.Resource == "" {
				gvr = deployments
			}
			var path []string
			if tc.path != "" {
				path = strings.Split(tc.path, ".")
			}
			f, err := Explain(doc, gvr, path)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("no error, got %+v", f)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.GVK != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
				t.Errorf("kind %v", f.GVK)
			}
			if f.Type != tc.typ {
				t.Errorf("type %q, want %q", f.Type, tc.typ)
			}
			rest := f.Description
			for _, w := range tc.desc {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("description lacks %q (in order):\n%s", w, f.Description)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
