package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

func fullApp(ns string) *webappv1.WebApp {
	return &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: webappv1.WebAppSpec{
			Image: "example.org/app:2", Replicas: 2, Port: 8080,
			Command: []string{"/app"}, Args: []string{"--verbose"},
			Env: []corev1.EnvVar{
				{Name: "MODE", Value: "prod"},
				{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
			},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
			// 1000m is stored by the server as 1: it must not look like drift.
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("0.5Gi")},
			},
			HealthCheckPath:      "/ready",
			LivenessProbe:        &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromString("http")}}, PeriodSeconds: 20},
			ImagePullSecrets:     []corev1.LocalObjectReference{{Name: "registry"}},
			ImagePullPolicy:      corev1.PullAlways,
			Service:              webappv1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Annotations: map[string]string{"lb.example/internal": "true"}},
			PodLabels:            map[string]string{"team": "payments"},
			PodAnnotations:       map[string]string{"prometheus.io/scrape": "true"},
			Strategy:             webappv1.RollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("0%"))},
			RevisionHistoryLimit: ptr.To(int32(3)),
			PodSecurity:          webappv1.PodSecurityBaseline,
		},
	}
}

func TestEverySpecFieldReachesTheChildrenAndQuantitiesCostNoWrites(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"greeting": "hello"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"TOKEN": "s3cret"}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	op := startOperator(t, ns, time.Second)
	if err := k8s.Create(ctx, fullApp(ns)); err != nil {
		t.Fatal(err)
	}
	dep, svc := waitChildren(t, ns, "full")
	c := dep.Spec.Template.Spec.Containers[0]
	tpl := dep.Spec.Template
	checks := []struct {
		what string
		ok   bool
	}{
		{"command/args", slices.Equal(c.Command, []string{"/app"}) && slices.Equal(c.Args, []string{"--verbose"})},
		{"env", len(c.Env) == 2 && c.Env[0].Value == "prod" && c.Env[1].ValueFrom.ConfigMapKeyRef.Key == "greeting"},
		{"envFrom", len(c.EnvFrom) == 1 && c.EnvFrom[0].SecretRef.Name == "creds"},
		{"resources", c.Resources.Requests.Cpu().String() == "1" && c.Resources.Limits.Memory().Cmp(resource.MustParse("512Mi")) == 0},
		{"readiness probe", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/ready"},
		{"liveness probe", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet.Path == "/live" && c.LivenessProbe.PeriodSeconds == 20},
		{"pull policy and secrets", c.ImagePullPolicy == corev1.PullAlways && len(tpl.Spec.ImagePullSecrets) == 1},
		{"pod labels", tpl.Labels["team"] == "payments" && tpl.Labels["app.kubernetes.io/instance"] == "full"},
		{"pod annotations and config hash", tpl.Annotations["prometheus.io/scrape"] == "true" && len(tpl.Annotations[webappv2.ConfigHashAnnotation]) == 32},
		{"strategy", dep.Spec.Strategy.RollingUpdate != nil && dep.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() == 1 && dep.Spec.Strategy.RollingUpdate.MaxUnavailable.String() == "0%"},
		{"revision history", *dep.Spec.RevisionHistoryLimit == 3},
		{"baseline security", tpl.Spec.SecurityContext.RunAsNonRoot == nil && c.SecurityContext.Capabilities == nil && !*c.SecurityContext.AllowPrivilegeEscalation},
		{"service type and annotations", svc.Spec.Type == corev1.ServiceTypeNodePort && svc.Annotations["lb.example/internal"] == "true" && svc.Spec.Ports[0].NodePort != 0},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s not in the children: deployment %+v service %+v", ch.what, dep.Spec, svc.Spec)
		}
	}
	// Converged (the server normalised 1000m to 1 and 0.5Gi to 512Mi, and allocated a node port): no writes.
	waitReady(t, ns, "full", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	op.writes.take()
	op.writes.takeConfigReads()
	waitResyncs(t, 3, 30*time.Second)
	if w := op.writes.take(); len(w) != 0 {
		t.Errorf("converged WebApp with normalised quantities cost %d writes: %q", len(w), w)
	}
	// The config hash is memoised by resourceVersion: resyncs read no ConfigMap or Secret.
	if r := op.writes.takeConfigReads(); len(r) != 0 {
		t.Errorf("converged resyncs read ConfigMaps or Secrets %d times: %q", len(r), r)
	}

	// Another manager's env var on our container survives our next apply, merged by name.
	inject := appsv1ac.Deployment("full", ns).WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
		WithContainers(corev1ac.Container().WithName("app").WithEnv(corev1ac.EnvVar().WithName("INJECTED").WithValue("yes"))))))
	if err := k8s.Apply(ctx, inject, client.FieldOwner("injector")); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "full", &webappv1.WebApp{}, func(app *webappv1.WebApp) { app.Spec.Args = []string{"--quiet"} })
	testutil.Eventually(t, wait10s, "our env and the injected one", func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := get(ctx, ns, "full", d); err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		var names []string
		for _, e := range c.Env {
			names = append(names, e.Name)
		}
		if !slices.Equal(c.Args, []string{"--quiet"}) || !slices.Contains(names, "INJECTED") || !slices.Contains(names, "MODE") || !slices.Contains(names, "GREETING") {
			return fmt.Errorf("args %v env %v", c.Args, names)
		}
		return nil
	})
}

func TestInvalidSpecAdditionsAreRefused(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name string
		spec map[string]any
		want string
	}{
		{"selector label in podLabels", map[string]any{"podLabels": map[string]any{"app.kubernetes.io/instance": "x"}}, "podLabels must not set app.kubernetes.io/name"},
		{"managed-by in podLabels", map[string]any{"podLabels": map[string]any{"app.kubernetes.io/managed-by": "me"}}, "podLabels must not set"},
		{"both health check path and probe", map[string]any{"healthCheckPath": "/h", "readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": int64(80)}}}, "set healthCheckPath or readinessProbe, not both"},
		{"health check path without slash", map[string]any{"healthCheckPath": "health"}, "spec.healthCheckPath in body should match"},
		{"service type", map[string]any{"service": map[string]any{"type": "ExternalName"}}, `spec.service.type: Unsupported value: "ExternalName"`},
		{"pod security", map[string]any{"podSecurity": "Privileged"}, `spec.podSecurity: Unsupported value: "Privileged"`},
		{"pull policy", map[string]any{"imagePullPolicy": "Sometimes"}, `spec.imagePullPolicy: Unsupported value: "Sometimes"`},
		{"revision history", map[string]any{"revisionHistoryLimit": int64(-1)}, "spec.revisionHistoryLimit in body should be greater than or equal to 0"},
		{"deletion policy", map[string]any{"deletionPolicy": "Keep"}, `spec.deletionPolicy: Unsupported value: "Keep"`},
		{"progress deadline", map[string]any{"progressDeadlineSeconds": int64(0)}, "spec.progressDeadlineSeconds in body should be greater than or equal to 1"},
		{"resource claims", map[string]any{"resources": map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}}, "resources.claims is not supported"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := map[string]any{"image": "nginx"}
			for k, v := range tc.spec {
				spec[k] = v
			}
			name := fmt.Sprintf("bad-%d", i)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "WebApp",
				"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
			}}
			err := k8s.Create(context.Background(), u)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: err = %v, want Invalid containing %q", err, tc.want)
			}
			if err := get(context.Background(), ns, name, &webappv1.WebApp{}); !apierrors.IsNotFound(err) {
				t.Errorf("stored after a refusal: %v", err)
			}
		})
	}
}

func TestPodDisruptionBudgetFollowsReplicas(t *testing.T) {
	ns, _ := runningWebApp(t, 2, time.Minute)
	pdbExists := func(want bool) {
		t.Helper()
		testutil.Eventually(t, wait10s, fmt.Sprintf("PDB exists = %v", want), func(ctx context.Context) error {
			pdb := &policyv1.PodDisruptionBudget{}
			err := get(ctx, ns, "web", pdb)
			switch {
			case want && err != nil:
				return err
			case want && (pdb.Spec.MaxUnavailable.IntValue() != 1 || metav1.GetControllerOf(pdb) == nil):
				return fmt.Errorf("pdb %+v", pdb)
			case !want && !apierrors.IsNotFound(err):
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
	}
	scale := func(n int32) {
		t.Helper()
		update(t, ns, "web", &webappv1.WebApp{}, func(app *webappv1.WebApp) { app.Spec.Replicas = n })
	}
	pdbExists(true)
	scale(1)
	pdbExists(false)
	scale(3)
	pdbExists(true)
}

func TestConfigChangesRollThePodTemplate(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"greeting": "hello"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, Data: map[string]string{"x": "1"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"TOKEN": []byte("a")}}
	for _, o := range []client.Object{cfg, other, sec} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// A long resync: only the ConfigMap and Secret watches can make the operator notice the changes in time.
	startOperator(t, ns, time.Hour)
	app := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: webappv1.WebAppSpec{Image: "nginx", Replicas: 1, Port: 80,
			Env:     []corev1.EnvVar{{Name: "G", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}}},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
		},
	}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	hash := func() string {
		d := &appsv1.Deployment{}
		if err := get(ctx, ns, "web", d); err != nil {
			return ""
		}
		return d.Spec.Template.Annotations[webappv2.ConfigHashAnnotation]
	}
	waitHashChange := func(from, what string) string {
		t.Helper()
		var now string
		testutil.Eventually(t, wait10s, what+" changes the config hash", func(context.Context) error {
			if now = hash(); now == "" || now == from {
				return fmt.Errorf("hash %q", now)
			}
			return nil
		})
		return now
	}
	h1 := waitHashChange("", "creation")

	// An unrelated ConfigMap changes, then the referenced one: only the second changes the hash. (The watch
	// delivers the two in order, so when the second has been seen the first has too.)
	other.Data["x"] = "2"
	if err := k8s.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	cfg.Data["greeting"] = "bonjour"
	if err := k8s.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h2 := waitHashChange(h1, "the referenced ConfigMap")
	sec.Data["TOKEN"] = []byte("b")
	if err := k8s.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	h3 := waitHashChange(h2, "the referenced Secret")
	// A metadata-only change of the referenced ConfigMap leaves the hash alone, and costs no Deployment write.
	// (The count is taken before the change: its reconcile can finish before the test reads the count again.)
	before := reconcileCount(t)
	cfg.Labels = map[string]string{"touched": "yes"}
	if err := k8s.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	other.Data["x"] = "3"
	if err := k8s.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	waitReconciles(t, before, 1)
	if h := hash(); h != h3 {
		t.Errorf("hash changed from %s to %s without a data change", h3, h)
	}
}
