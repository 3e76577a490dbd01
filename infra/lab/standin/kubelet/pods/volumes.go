package pods

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// Lookup says whether the named ConfigMap or Secret ("configmap",
// "secret") exists in namespace ns.
type Lookup func(kind, ns, name string) (bool, error)

// VolumeProblem is the first volume of pod the kubelet could not set up,
// worded as its FailedMount event: a ConfigMap or Secret that does not
// exist (unless optional), a hostPath that is not of its declared type.
// hostPath volumes of the ...OrCreate types are created, as the kubelet
// creates them (root prefixes the paths: the node's / in production).
func VolumeProblem(pod *corev1.Pod, lookup Lookup, root string) error {
	for _, v := range pod.Spec.Volumes {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("MountVolume.SetUp failed for volume %q : %s", v.Name, fmt.Sprintf(format, args...))
		}
		var refs []ref
		switch {
		case v.ConfigMap != nil:
			refs = append(refs, ref{"configmap", v.ConfigMap.Name, ptrTrue(v.ConfigMap.Optional)})
		case v.Secret != nil:
			refs = append(refs, ref{"secret", v.Secret.SecretName, ptrTrue(v.Secret.Optional)})
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					refs = append(refs, ref{"configmap", s.ConfigMap.Name, ptrTrue(s.ConfigMap.Optional)})
				}
				if s.Secret != nil {
					refs = append(refs, ref{"secret", s.Secret.Name, ptrTrue(s.Secret.Optional)})
				}
			}
		case v.HostPath != nil:
			if err := hostPath(v.HostPath, root); err != nil {
				return fail("%v", err)
			}
		}
		for _, r := range refs {
			ok, err := lookup(r.kind, pod.Namespace, r.name)
			if err != nil {
				return fail("%v", err)
			}
			if !ok && !r.optional {
				return fail("%s %q not found", r.kind, r.name)
			}
		}
	}
	return nil
}

type ref struct {
	kind, name string
	optional   bool
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// ConfigProblem is the first environment reference of pod's containers
// that does not resolve: the container is not created
// (CreateContainerConfigError).
func ConfigProblem(pod *corev1.Pod, lookup Lookup) error {
	check := func(kind, name string, optional *bool) error {
		ok, err := lookup(kind, pod.Namespace, name)
		if err != nil {
			return err
		}
		if !ok && !ptrTrue(optional) {
			return fmt.Errorf("%s %q not found", kind, name)
		}
		return nil
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				if err := check("configmap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional); err != nil {
					return err
				}
			}
			if e.SecretRef != nil {
				if err := check("secret", e.SecretRef.Name, e.SecretRef.Optional); err != nil {
					return err
				}
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				if err := check("configmap", r.Name, r.Optional); err != nil {
					return err
				}
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				if err := check("secret", r.Name, r.Optional); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// hostPath checks (and for the ...OrCreate types makes) a hostPath volume
// as the kubelet's type checker does.
func hostPath(h *corev1.HostPathVolumeSource, root string) error {
	p := filepath.Join(root, h.Path)
	t := corev1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	st, err := os.Stat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostPath type check failed: %v", err)
	}
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(p, 0o755)
		}
		if !st.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", h.Path)
		}
	case corev1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath type check failed: %v", err)
			}
			return f.Close()
		}
		if st.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", h.Path)
		}
	case corev1.HostPathDirectory:
		if !exists || !st.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", h.Path)
		}
	case corev1.HostPathFile:
		if !exists || !st.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", h.Path)
		}
	case corev1.HostPathSocket:
		if !exists || st.Mode()&fs.ModeSocket == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", h.Path)
		}
	case corev1.HostPathCharDev:
		if !exists || st.Mode()&fs.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", h.Path)
		}
	case corev1.HostPathBlockDev:
		if !exists || st.Mode()&fs.ModeDevice == 0 || st.Mode()&fs.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", h.Path)
		}
	}
	return nil
}
