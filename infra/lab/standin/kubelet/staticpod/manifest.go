package staticpod

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Spec is what the stand-in runs for one static pod: the first container of
// the manifest as a plain process of the node.
type Spec struct {
	Name     string
	Manifest string // file the spec came from
	Hash     string // of the manifest bytes
	Image    string // the first container's
	Argv     []string
	Env      []string // NAME=value, from the container only
	Dir      string
	Pod      *corev1.Pod // as parsed
}

// ParseManifest turns a v1 Pod manifest (YAML or JSON) into a Spec.
func ParseManifest(file string, data []byte) (*Spec, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("%s: kind %q is not Pod", file, pod.Kind)
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s: pod has no containers", file)
	}
	name := pod.Name
	if name == "" {
		name = strings.TrimSuffix(path.Base(file), path.Ext(file))
	}
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("%s: bad pod name %q", file, name)
	}
	c := pod.Spec.Containers[0]

	vars := map[string]string{}
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue // no API objects to resolve from in a static pod
		}
		v := expand(e.Value, vars)
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}

	var argv []string
	for _, a := range c.Command {
		argv = append(argv, expand(a, vars))
	}
	if len(argv) == 0 {
		// Without an image there is no entrypoint; the image's base name is
		// the binary's name for all the control-plane images.
		bin, err := imageBinary(c.Image)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		argv = []string{bin}
	}
	for _, a := range c.Args {
		argv = append(argv, expand(a, vars))
	}

	sum := sha256.Sum256(data)
	return &Spec{
		Name:     name,
		Manifest: file,
		Hash:     hex.EncodeToString(sum[:]),
		Image:    c.Image,
		Argv:     argv,
		Env:      env,
		Dir:      c.WorkingDir,
		Pod:      &pod,
	}, nil
}

func imageBinary(image string) (string, error) {
	if image == "" {
		return "", errors.New("container has neither command nor image")
	}
	name := image
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	name = path.Base(name)
	if i := strings.Index(name, ":"); i >= 0 {
		name = name[:i]
	}
	return name, nil
}

// expand resolves $(VAR) references the way the kubelet does for command,
// args and env: known variables are substituted, $$ escapes a dollar, and
// unknown references stay as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
