package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/pause"
)

// TestMain runs the test binary as the pause stand-in when it is called
// by that name: the integration test's image tree holds it as the pause
// image's binary, as the lab's holds homelab-node.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "pause" {
		os.Exit(pause.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

const pauseImage = "registry.k8s.io/pause:3.10.1"

// makeImages lays out the test's image tree as lab up does: the static
// pods' images with the cached binaries, pause with this binary.
func (e *env) makeImages(kubeDir, etcdDir string) {
	root := filepath.Join(e.dir, "images")
	symlink := func(src, dst string) error { return os.Symlink(src, dst) }
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := images.Add(root, "registry.k8s.io/"+name+":v1.34.4", map[string]string{name: filepath.Join(kubeDir, name)}, symlink); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := images.Add(root, "registry.k8s.io/etcd:v1.34.4", map[string]string{"etcd": filepath.Join(etcdDir, "etcd")}, symlink); err != nil {
		e.t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	// A hard link (or copy): a symlink would run under the test binary's
	// own name.
	link := func(src, dst string) error {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o755)
	}
	if err := images.Add(root, pauseImage, map[string]string{"pause": self}, link); err != nil {
		e.t.Fatal(err)
	}
	e.images = &images.Store{Dir: root}
}

// healthCheckJob is the Job kubeadm upgrade's health check creates
// (cmd/kubeadm/app/phases/upgrade/health.go, createJob).
func healthCheckJob(name, image string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](20),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsUser: ptr.To[int64](999), RunAsGroup: ptr.To[int64](999), RunAsNonRoot: ptr.To(true),
					},
					Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
					Containers:  []corev1.Container{{Name: name, Image: image, Args: []string{"-v"}}},
				},
			},
		},
	}
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// checkJobs: kubeadm's upgrade health check Job completes (its pod runs the
// pause image with -v, which exits 0, the controller-manager's Job
// controller completes it), and the same Job with an image the node
// cannot pull does not: its pod waits in ImagePullBackOff.
func (e *env) checkJobs() {
	t := e.t
	ctx := context.Background()
	start := time.Now()
	if _, err := e.admin.BatchV1().Jobs("kube-system").Create(ctx, healthCheckJob("upgrade-health-check", pauseImage), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.BatchV1().Jobs("kube-system").Create(ctx, healthCheckJob("unpullable", "registry.k8s.io/pause:0.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the health check Job Complete", 60*time.Second, func() error {
		j, err := e.admin.BatchV1().Jobs("kube-system").Get(ctx, "upgrade-health-check", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !jobCondition(j, batchv1.JobComplete) {
			return fmt.Errorf("conditions %+v, succeeded %d, failed %d", j.Status.Conditions, j.Status.Succeeded, j.Status.Failed)
		}
		return nil
	})
	t.Logf("health check Job complete %s after its creation", time.Since(start).Round(time.Millisecond))
	waitFor(t, "the unpullable Job's pod in ImagePullBackOff", 60*time.Second, func() error {
		l, err := e.admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "job-name=unpullable"})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d pods", len(l.Items))
		}
		p := l.Items[0]
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff" {
				return nil
			}
		}
		return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
	})
	j, err := e.admin.BatchV1().Jobs("kube-system").Get(ctx, "unpullable", metav1.GetOptions{})
	if err != nil || jobCondition(j, batchv1.JobComplete) || j.Status.Succeeded != 0 {
		t.Errorf("the unpullable Job: %+v %v", j.Status, err)
	}
}
