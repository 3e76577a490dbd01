package helmrelease

import (
	"bytes"
	"fmt"
	"slices"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// Images renders the chart as `helm template` does (no cluster, the
// release's name and namespace, the declared Kubernetes version) and
// returns the container images its objects and hooks name, sorted: what a
// node pulls once the release is installed with values.
func Images(ch *chart.Chart, values map[string]any, release, namespace, kubeVersion string) ([]string, error) {
	in := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	in.ReleaseName, in.Namespace = release, namespace
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	in.KubeVersion = kv
	rel, err := in.Run(ch, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	manifests := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	seen := map[string]bool{}
	for _, m := range manifests {
		for _, doc := range bytes.Split([]byte(m), []byte("\n---")) {
			var obj any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, fmt.Errorf("chart %s renders an object that is not YAML: %w", ch.Name(), err)
			}
			containerImages(obj, seen)
		}
	}
	out := make([]string, 0, len(seen))
	for ref := range seen {
		out = append(out, ref)
	}
	slices.Sort(out)
	return out, nil
}

// containerImages adds the image of every container under v: any pod
// template's containers, init and ephemeral containers, whatever object
// (Deployment, DaemonSet, Job, CronJob) holds it.
func containerImages(v any, seen map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if list, ok := child.([]any); ok && (k == "containers" || k == "initContainers" || k == "ephemeralContainers") {
				for _, c := range list {
					if c, ok := c.(map[string]any); ok {
						if ref, ok := c["image"].(string); ok && ref != "" {
							seen[ref] = true
						}
					}
				}
			}
			containerImages(child, seen)
		}
	case []any:
		for _, child := range v {
			containerImages(child, seen)
		}
	}
}
