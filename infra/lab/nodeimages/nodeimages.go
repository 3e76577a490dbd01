// Package nodeimages builds the container images the emulated homelab's
// real nodes run, from binaries built on this machine (no registry on the
// Internet is reachable): each one layer over nothing, together an OCI
// image layout that the lab's registry (infra/lab/registry) serves to the
// nodes' containerd as their air-gapped mirror.
package nodeimages

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one file of an image's layer: Src on this machine, Path in the
// image; or, with Link, a hard link at Path to the file at Link (one
// multi-call binary under several names, stored once).
type File struct {
	Src  string
	Path string
	Mode int64
	Link string
}

// Image is an image to build.
type Image struct {
	Ref        string // registry.k8s.io/pause:3.10.1
	Files      []File
	Entrypoint []string
	Cmd        []string
}

// RefAnnotation names an image in the layout's index with its full
// reference (registry.k8s.io/pause:3.10.1), as containerd's and
// skopeo's OCI exports do.
const RefAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes imgs as a new OCI image layout at dir (what the
// lab's registry serves), each named in the index by RefAnnotation.
func WriteLayout(dir string, imgs []Image) error {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, img := range imgs {
		if seen[img.Ref] {
			return fmt.Errorf("image %s: built twice", img.Ref)
		}
		seen[img.Ref] = true
		i, err := Build(img)
		if err != nil {
			return err
		}
		if err := p.AppendImage(i, layout.WithAnnotations(map[string]string{RefAnnotation: img.Ref})); err != nil {
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// Cached returns the directory under cache holding img alone as an OCI
// layout, written only when no build of the same inputs is there: the
// same reference, entrypoint and files from the same source files (by
// size, modification time and inode). Rebuilding the control-plane images
// at every lab up would hash and write hundreds of megabytes each time.
func Cached(cache string, img Image) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q\n", img.Ref, img.Entrypoint, img.Cmd)
	for _, f := range img.Files {
		fmt.Fprintf(h, "%q %o %q", f.Path, f.Mode, f.Link)
		if f.Src != "" {
			st, err := os.Stat(f.Src)
			if err != nil {
				return "", fmt.Errorf("image %s: %w", img.Ref, err)
			}
			var ino uint64
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				ino = sys.Ino
			}
			fmt.Fprintf(h, " %q %d %d %d", f.Src, st.Size(), st.ModTime().UnixNano(), ino)
		}
		fmt.Fprintln(h)
	}
	dir := filepath.Join(cache, strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref)+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	return dir, WriteLayout(dir, []Image{img})
}

// Build builds img: one layer over nothing, for this machine's platform.
func Build(img Image) (v1.Image, error) {
	if _, err := name.NewTag(img.Ref, name.StrictValidation); err != nil {
		return nil, fmt.Errorf("image %q: %w", img.Ref, err)
	}
	layerTar, err := layerOf(img.Files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	i, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	// containerd picks the image's platform from its config: one that says
	// nothing matches no platform and is not unpacked.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint, cf.Config.Cmd = img.Entrypoint, img.Cmd
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(i, cf)
}

// layerOf is the layer's tar: each file with its parent directories, in a
// fixed order, owned by root, with no time, so the same binaries give the
// same image digest.
func layerOf(files []File) ([]byte, error) {
	sorted := append([]File(nil), files...)
	// Links after every file: a link to a file not yet extracted fails
	// (containerd's unpack makes them in the tar's order).
	sort.Slice(sorted, func(i, j int) bool {
		if (sorted[i].Link == "") != (sorted[j].Link == "") {
			return sorted[i].Link == ""
		}
		return sorted[i].Path < sorted[j].Path
	})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	modes := map[string]int64{}
	for _, f := range sorted {
		p := path.Clean("/" + f.Path)[1:]
		var parents []string
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if f.Link != "" {
			// The link's mode is its target's: containerd applies a link
			// entry's mode to the inode they share.
			target := path.Clean("/" + f.Link)[1:]
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: p, Linkname: target, Mode: modes[target], ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			continue
		}
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		modes[p] = mode
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var epoch = time.Unix(0, 0)
