package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// waitNodeReady waits until the kubelet has registered the node and reports it Ready (containerd and the CNI
// configuration found) and the node-lifecycle controller has lifted the not-ready taint.
func (c *Cluster) waitNodeReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, Patience(90*time.Second), true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, c.exited()
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		return ready && len(n.Spec.Taints) == 0, c.exited()
	})
}

// checkServiceAnswers proves the node works end to end before anyone uses it: a Deployment of the test web app
// becomes available (the kubelet's readiness probe passed) and answers an HTTP GET through its Service's
// ClusterIP (kube-proxy's rules); then both are deleted.
func (c *Cluster) checkServiceAnswers(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ns, name := metav1.NamespaceDefault, "cluster-check"
	labels := map[string]string{"app": name}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, checkDeployment(name, labels), metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if svc, err = cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, Patience(90*time.Second), true, func(ctx context.Context) (bool, error) {
		last = httpGetOK(ctx, "http://"+svc.Spec.ClusterIP+"/")
		return last == nil, c.exited()
	})
	if err != nil {
		return fmt.Errorf("waiting for the test web app to answer through its Service: %w (last: %w)", err, last)
	}
	propagation := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, name, propagation); err != nil {
		return err
	}
	return cs.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// checkDeployment is one replica of the test web app with an HTTP readiness probe.
func checkDeployment(name string, labels map[string]string) *appsv1.Deployment {
	probe := &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "web", Image: WebserverImage, ImagePullPolicy: corev1.PullNever, ReadinessProbe: probe,
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
}

// httpGetOK is nil when a GET of url answers 200 within 2 s. Only ever called inside the node's namespace.
func httpGetOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
