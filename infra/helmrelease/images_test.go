package helmrelease

import (
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

// imagesFixture names images as charts do: from values, in init and
// main containers, in a hook, and behind a condition on the Kubernetes
// version.
func imagesFixture() *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "images-fixture", Version: "0.1.0"},
		Values:   map[string]any{"tag": "v1", "operator": map[string]any{"enabled": true}},
		Templates: []*chart.File{
			{Name: "templates/ds.yaml", Data: []byte(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: {{ .Release.Namespace }}}
spec:
  template:
    spec:
      initContainers: [{name: init, image: "example.io/init:{{ .Values.tag }}"}]
      containers:
      - {name: agent, image: "example.io/agent:{{ .Values.tag }}@sha256:0123"}
{{- if semverCompare ">=1.35-0" .Capabilities.KubeVersion.Version }}
      - {name: new, image: example.io/new:v1}
{{- end }}
`)},
			{Name: "templates/op.yaml", Data: []byte(`{{- if .Values.operator.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata: {name: operator}
spec: {template: {spec: {containers: [{name: op, image: "example.io/operator:{{ .Values.tag }}"}]}}}
{{- end }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-pod}
data: {image: example.io/not-pulled:v1}
`)},
			{Name: "templates/hook.yaml", Data: []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: hook
  annotations: {"helm.sh/hook": pre-install}
spec: {template: {spec: {containers: [{name: h, image: example.io/hook:v1}]}}}
`)},
		},
	}
}

func TestImagesAreWhatTheReleaseRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		kube   string
		want   []string
	}{
		{"defaults", nil, "v1.34.4", []string{"example.io/agent:v1@sha256:0123", "example.io/hook:v1", "example.io/init:v1", "example.io/operator:v1"}},
		{"values and version", map[string]any{"tag": "v2", "operator": map[string]any{"enabled": false}}, "v1.35.4",
			[]string{"example.io/agent:v2@sha256:0123", "example.io/hook:v1", "example.io/init:v2", "example.io/new:v1"}},
	} {
		got, err := Images(imagesFixture(), tc.values, "rel", "kube-system", tc.kube)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
