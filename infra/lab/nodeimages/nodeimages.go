// Package nodeimages builds the container images the emulated homelab's
// real nodes run, from binaries built on this machine (no registry on the
// Internet is reachable): each is a docker-archive tarball, one layer over
// nothing, that containerd imports as it would an image pulled from a
// registry (infra/lab/image's homelab-lab-images.service).
package nodeimages

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
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

// Write builds img as a docker-archive tarball at out.
func Write(img Image, out string) error {
	tag, err := name.NewTag(img.Ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image %q: %w", img.Ref, err)
	}
	layerTar, err := layerOf(img.Files)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	i, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	// containerd picks the image's platform from its config: one that says
	// nothing matches no platform and is not unpacked.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint, cf.Config.Cmd = img.Entrypoint, img.Cmd
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	i, err = mutate.ConfigFile(i, cf)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, i); err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return os.Rename(tmp, out)
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
