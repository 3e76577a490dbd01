package nodefacts

import (
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Unmounted is a flag naming a path the container cannot see.
type Unmounted struct {
	Flag, Path string
}

// UnmountedPaths are the component's flags naming an absolute path that
// no volume mount of its container covers: the container sees its
// image's filesystem and its mounts only, so the component fails on a
// file that is right there on the node (kubeadm mounts its own files;
// a flag added by hand or through extraArgs needs an extraVolume too).
// Sorted by flag.
func UnmountedPaths(pod *corev1.Pod) []Unmounted {
	c := Component(pod)
	if c == nil {
		return nil
	}
	var out []Unmounted
	flags := PodFlags(pod)
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		for _, p := range strings.Split(flags[k], ",") {
			if !strings.HasPrefix(p, "/") || mounted(c.VolumeMounts, p) {
				continue
			}
			out = append(out, Unmounted{Flag: k, Path: p})
		}
	}
	return out
}

func mounted(mounts []corev1.VolumeMount, p string) bool {
	p = path.Clean(p)
	for _, m := range mounts {
		mp := path.Clean(m.MountPath)
		if p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			return true
		}
	}
	return false
}
