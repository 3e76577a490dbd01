// Package images is the lab's stand-in for a registry and a node's image
// store: a read-only tree, laid over every node, with one directory per
// image reference the lab can "pull" (registry.k8s.io/kube-apiserver/
// v1.34.4/), holding the binaries a container of that image runs. The
// kubelet stand-in runs a static pod's binary from its image's directory
// and the CRI stand-in pulls only what the tree has, so a manifest naming
// another version runs that version, and one naming a version the lab does
// not have fails to start, as an image that cannot be pulled does.
package images

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Root is where the tree is on a node.
const Root = "/usr/lib/homelab/images"

// ErrNotFound: the reference is not in the store (what an offline registry
// answers for an image it does not hold).
var ErrNotFound = errors.New("not found")

// Store is an image tree rooted at Dir.
type Store struct{ Dir string }

// Ref splits an image reference into its repository path and tag; a
// reference without a tag is :latest, one with a digest is refused (the
// lab's images have none).
func Ref(image string) (repo, tag string, err error) {
	if image == "" {
		return "", "", errors.New("no image given")
	}
	if strings.Contains(image, "@") {
		return "", "", fmt.Errorf("%s: references by digest are not in the lab's store", image)
	}
	repo, tag = image, "latest"
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo, tag = image[:i], image[i+1:]
	}
	// Docker Hub's short names, as containerd normalises them.
	// The first component names a registry when it has a dot or a port,
	// or is localhost.
	first, _, more := strings.Cut(repo, "/")
	if !more || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !more {
			repo = "library/" + repo
		}
		repo = "docker.io/" + repo
	}
	if tag == "" || strings.Contains(tag, "/") || repo != path.Clean(repo) || strings.HasPrefix(repo, "/") || strings.Contains(repo, "..") {
		return "", "", fmt.Errorf("%s: not an image reference", image)
	}
	return repo, tag, nil
}

// Image returns the image's directory, or an error wrapping ErrNotFound.
func (s Store) Image(image string) (string, error) {
	repo, tag, err := Ref(image)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.Dir, filepath.FromSlash(repo), tag)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("failed to resolve reference %q: %s:%s: %w (the lab has no such image)", image, repo, tag, ErrNotFound)
	}
	return dir, nil
}

// Has reports whether the store holds image.
func (s Store) Has(image string) bool {
	_, err := s.Image(image)
	return err == nil
}

// Binary returns the path of the executable a container of image runs as
// name: looked up in the image's directory, never on the node's PATH.
func (s Store) Binary(image, name string) (string, error) {
	dir, err := s.Image(image)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, path.Base(name))
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("image %s has no executable %s", image, path.Base(name))
	}
	return p, nil
}

// Add puts image in the tree under root with the given binaries (name to
// source path), hard-linked or copied by link; an image without binaries
// is one the lab never runs (pause, coredns, kube-proxy) but can pull.
func Add(root, image string, bins map[string]string, link func(src, dst string) error) error {
	repo, tag, err := Ref(image)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, filepath.FromSlash(repo), tag)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, src := range bins {
		if err := link(src, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("image %s: %w", image, err)
		}
	}
	return nil
}
