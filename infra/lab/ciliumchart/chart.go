// Package ciliumchart is the emulated homelab's stand-in for Cilium's Helm
// chart, which these machines cannot download: the objects homelab
// installs, waits for and reads, shaped as Cilium's chart renders them from
// the same values (chart source in cilium/). The lab writes it as a chart
// archive into its directory; inventory/lab.yaml's cluster.cilium.chart
// names that file.
package ciliumchart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sigs.k8s.io/yaml"
	"sort"
	"time"

	"github.com/homelab-dev/homelab/roles/cilium"
)

//go:embed all:cilium
var source embed.FS

// Version is the stand-in's chart version: Cilium's, marked as a stand-in.
const Version = cilium.ChartVersion + "-standin"

// FileName is the archive's name, as `helm package` names it.
const FileName = cilium.ChartName + "-" + Version + ".tgz"

// epoch is every archive entry's time: the same source gives the same
// bytes, so the provisioner sees no new chart when the lab rebuilds it.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Archive returns the chart as a .tgz, entries under cilium/ as helm
// package writes them, in a fixed order.
func Archive() ([]byte, error) {
	var names []string
	err := fs.WalkDir(source, "cilium", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	gz.ModTime = epoch
	tw := tar.NewWriter(gz)
	for _, n := range names {
		data, err := source.ReadFile(n)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: path.Clean(n), Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write puts the archive into dir as FileName, leaving a file with the same
// bytes untouched, and returns its path.
func Write(dir string) (string, error) {
	data, err := Archive()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, FileName)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	return p, nil
}

// Images are the agent's and the operator's image references with the
// chart's default values: what a real node of the lab must be able to
// pull for the chart's pods to run on it.
func Images() (agent, operator string, err error) {
	data, err := source.ReadFile("cilium/values.yaml")
	if err != nil {
		return "", "", err
	}
	type image struct{ Repository, Tag string }
	var v struct {
		Image    image
		Operator struct{ Image image }
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return "", "", fmt.Errorf("the stand-in chart's values.yaml: %w", err)
	}
	if v.Image.Repository == "" || v.Image.Tag == "" || v.Operator.Image.Repository == "" || v.Operator.Image.Tag == "" {
		return "", "", fmt.Errorf("the stand-in chart's values.yaml names no agent or operator image")
	}
	return v.Image.Repository + ":" + v.Image.Tag, v.Operator.Image.Repository + ":" + v.Operator.Image.Tag, nil
}
