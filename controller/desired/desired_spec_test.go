package desired

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

// Each spec addition reaches the pod template, the Service or the PDB; an unset one adds nothing.
func TestDesiredDeploymentSpecAdditions(t *testing.T) {
	cmRef := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "k"}}
	cases := []struct {
		name  string
		set   func(*webappv2.WebAppSpec)
		hash  string
		check func(t *testing.T, d *appsv1.Deployment, c corev1.Container)
	}{
		{"defaults: TCP readiness probe, restricted security, no strategy", func(*webappv2.WebAppSpec) {}, "", func(t *testing.T, d *appsv1.Deployment, c corev1.Container) {
			if c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket.Port != intstr.FromString("http") {
				t.Errorf("readiness probe = %+v", c.ReadinessProbe)
			}
			psc, sc := d.Spec.Template.Spec.SecurityContext, c.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context = %+v", psc)
			}
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("container security context = %+v", sc)
			}
			if c.LivenessProbe != nil || c.Env != nil || c.EnvFrom != nil || c.Command != nil || c.Args != nil || c.ImagePullPolicy != "" ||
				d.Spec.Strategy.RollingUpdate != nil || d.Spec.RevisionHistoryLimit != nil || d.Spec.Template.Annotations != nil || len(c.Resources.Requests) != 0 {
				t.Errorf("unset fields set: %+v / %+v", c, d.Spec)
			}
		}},
		{"baseline opt-out", func(s *webappv2.WebAppSpec) { s.Pod.Security = webappv2.PodSecurityBaseline }, "", func(t *testing.T, d *appsv1.Deployment, c corev1.Container) {
			if psc := d.Spec.Template.Spec.SecurityContext; psc.RunAsNonRoot != nil || psc.SeccompProfile == nil {
				t.Errorf("pod security context = %+v", psc)
			}
			if sc := c.SecurityContext; sc.Capabilities != nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("container security context = %+v", sc)
			}
		}},
		{"health check path", func(s *webappv2.WebAppSpec) { s.Container.HealthCheckPath = "/healthz" }, "", func(t *testing.T, _ *appsv1.Deployment, c corev1.Container) {
			if g := c.ReadinessProbe.HTTPGet; g == nil || g.Path != "/healthz" || g.Port != intstr.FromString("http") || c.ReadinessProbe.TCPSocket != nil {
				t.Errorf("readiness probe = %+v", c.ReadinessProbe)
			}
		}},
		{"full probes", func(s *webappv2.WebAppSpec) {
			s.Container.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 3}
			s.Container.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(9000)}}, FailureThreshold: 5}
		}, "", func(t *testing.T, _ *appsv1.Deployment, c corev1.Container) {
			if p := c.ReadinessProbe; p.Exec == nil || p.Exec.Command[0] != "true" || p.PeriodSeconds != 3 || p.TCPSocket != nil {
				t.Errorf("readiness probe = %+v", p)
			}
			if p := c.LivenessProbe; p == nil || p.HTTPGet.Path != "/live" || p.FailureThreshold != 5 {
				t.Errorf("liveness probe = %+v", p)
			}
		}},
		{"env, envFrom, command, args, pull policy", func(s *webappv2.WebAppSpec) {
			s.Container.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: cmRef}}
			s.Container.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}}}
			s.Container.Command, s.Container.Args, s.Container.ImagePullPolicy = []string{"/bin/app"}, []string{"--port", "80"}, corev1.PullAlways
		}, "", func(t *testing.T, _ *appsv1.Deployment, c corev1.Container) {
			if len(c.Env) != 2 || c.Env[0].Value != "1" || c.Env[1].ValueFrom.ConfigMapKeyRef.Name != "cfg" || len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "sec" {
				t.Errorf("env %+v envFrom %+v", c.Env, c.EnvFrom)
			}
			if len(c.Command) != 1 || len(c.Args) != 2 || c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("command %v args %v pull %q", c.Command, c.Args, c.ImagePullPolicy)
			}
		}},
		{"resources keep their value", func(s *webappv2.WebAppSpec) {
			s.Container.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
		}, "", func(t *testing.T, _ *appsv1.Deployment, c corev1.Container) {
			if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("1")) != 0 {
				t.Errorf("cpu request = %v", cpu.String())
			}
			if mem := c.Resources.Limits[corev1.ResourceMemory]; mem.Cmp(resource.MustParse("128Mi")) != 0 {
				t.Errorf("memory limit = %v", mem.String())
			}
		}},
		{"pod labels and annotations under ours, pull secrets, config hash", func(s *webappv2.WebAppSpec) {
			s.Pod.Labels = map[string]string{"team": "payments"}
			s.Pod.Annotations = map[string]string{"prometheus.io/scrape": "true"}
			s.Pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		}, "abc123", func(t *testing.T, d *appsv1.Deployment, _ corev1.Container) {
			tpl := d.Spec.Template
			if tpl.Labels["team"] != "payments" || tpl.Labels[webappv2.LabelInstance] != "x" || len(tpl.Labels) != 4 {
				t.Errorf("template labels = %v", tpl.Labels)
			}
			if tpl.Annotations["prometheus.io/scrape"] != "true" || tpl.Annotations[webappv2.ConfigHashAnnotation] != "abc123" {
				t.Errorf("template annotations = %v", tpl.Annotations)
			}
			if len(tpl.Spec.ImagePullSecrets) != 1 || tpl.Spec.ImagePullSecrets[0].Name != "registry" {
				t.Errorf("pull secrets = %v", tpl.Spec.ImagePullSecrets)
			}
			if d.Spec.Selector.MatchLabels["team"] != "" {
				t.Errorf("pod labels leaked into the selector: %v", d.Spec.Selector.MatchLabels)
			}
		}},
		{"rollout strategy and history", func(s *webappv2.WebAppSpec) {
			s.Rollout = webappv2.RolloutSpec{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("50%"))}
			s.Rollout.RevisionHistoryLimit = ptr.To(int32(2))
		}, "", func(t *testing.T, d *appsv1.Deployment, _ corev1.Container) {
			ru := d.Spec.Strategy.RollingUpdate
			if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.String() != "50%" {
				t.Errorf("strategy = %+v", d.Spec.Strategy)
			}
			if d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 2 {
				t.Errorf("revisionHistoryLimit = %v", d.Spec.RevisionHistoryLimit)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 2, 80, "nginx")
			tc.set(&app.Spec)
			ac, err := Deployment(app, Inputs{ConfigHash: tc.hash})
			if err != nil {
				t.Fatal(err)
			}
			d := apptest.Typed[appsv1.Deployment](t, ac)
			if len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("containers = %+v", d.Spec.Template.Spec.Containers)
			}
			tc.check(t, d, d.Spec.Template.Spec.Containers[0])
		})
	}
}

func TestDesiredServiceTypeAndAnnotations(t *testing.T) {
	cases := []struct {
		svc      webappv2.ServiceSpec
		wantType corev1.ServiceType
	}{
		{webappv2.ServiceSpec{}, corev1.ServiceTypeClusterIP},
		{webappv2.ServiceSpec{Type: corev1.ServiceTypeNodePort}, corev1.ServiceTypeNodePort},
		{webappv2.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Annotations: map[string]string{"lb.example/internal": "true"}}, corev1.ServiceTypeLoadBalancer},
	}
	for _, tc := range cases {
		app := apptest.NewApp("x", 1, 80, "nginx")
		app.Spec.Service = tc.svc
		s := apptest.Typed[corev1.Service](t, Service(app, canary.Traffic{}))
		if s.Spec.Type != tc.wantType || !maps.Equal(s.Annotations, tc.svc.Annotations) {
			t.Errorf("%+v: type %q annotations %v", tc.svc, s.Spec.Type, s.Annotations)
		}
	}
}

func TestDesiredPDB(t *testing.T) {
	for _, replicas := range []int32{1, 2, 10} {
		app := apptest.NewApp("x", replicas, 80, "nginx")
		ac := PDB(app)
		if replicas < 2 {
			if ac != nil {
				t.Errorf("replicas %d: a PDB %+v, want none", replicas, ac)
			}
			continue
		}
		p := apptest.Typed[policyv1.PodDisruptionBudget](t, ac)
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || !maps.Equal(p.Spec.Selector.MatchLabels, SelectorLabels(app)) ||
			p.Spec.UnhealthyPodEvictionPolicy == nil || *p.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
			t.Errorf("replicas %d: spec = %+v", replicas, p.Spec)
		}
		apptest.CheckOwner(t, p.OwnerReferences, app)
	}
}

// TestDesiredPortsAndReplicas: v2's named ports reach the container and the Service (each Service port targets the
// container port of its name), the first is the primary one (readiness, status.url); an unset count is 1 and an
// empty port list is v2's default, http 80.
func TestDesiredPortsAndReplicas(t *testing.T) {
	cases := []struct {
		name      string
		ports     []webappv2.Port
		replicas  *int32
		want      []webappv2.Port
		wantCount int32
	}{
		{"v1's one port", []webappv2.Port{{Name: "http", Port: 8080}}, ptr.To(int32(3)), []webappv2.Port{{Name: "http", Port: 8080}}, 3},
		{"named ports", []webappv2.Port{{Name: "web", Port: 8080}, {Name: "metrics", Port: 9090}}, nil, []webappv2.Port{{Name: "web", Port: 8080}, {Name: "metrics", Port: 9090}}, 1},
		{"no ports (built in Go)", nil, ptr.To(int32(2)), []webappv2.Port{{Name: "http", Port: 80}}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 1, 80, "nginx")
			app.Spec.Ports, app.Spec.Replicas = tc.ports, tc.replicas
			d := apptest.Typed[appsv1.Deployment](t, mustDeployment(t, app))
			s := apptest.Typed[corev1.Service](t, Service(app, canary.Traffic{}))
			c := d.Spec.Template.Spec.Containers[0]
			if *d.Spec.Replicas != tc.wantCount {
				t.Errorf("replicas = %d, want %d", *d.Spec.Replicas, tc.wantCount)
			}
			if (PDB(app) != nil) != (tc.wantCount > 1) {
				t.Errorf("PDB for %d replicas: %v", tc.wantCount, PDB(app) != nil)
			}
			if len(c.Ports) != len(tc.want) || len(s.Spec.Ports) != len(tc.want) {
				t.Fatalf("container ports %+v, service ports %+v, want %+v", c.Ports, s.Spec.Ports, tc.want)
			}
			for i, p := range tc.want {
				if c.Ports[i].Name != p.Name || c.Ports[i].ContainerPort != p.Port || c.Ports[i].Protocol != corev1.ProtocolTCP {
					t.Errorf("container port %d = %+v, want %+v", i, c.Ports[i], p)
				}
				sp := s.Spec.Ports[i]
				if sp.Name != p.Name || sp.Port != p.Port || sp.TargetPort != intstr.FromString(p.Name) || sp.Protocol != corev1.ProtocolTCP {
					t.Errorf("service port %d = %+v, want %+v", i, sp, p)
				}
			}
			if r := c.ReadinessProbe; r == nil || r.TCPSocket == nil || r.TCPSocket.Port != intstr.FromString(tc.want[0].Name) {
				t.Errorf("readiness = %+v, want a TCP check of %s", r, tc.want[0].Name)
			}
			if u := ServiceURL(app); u != fmt.Sprintf("http://x.ns.svc:%d", tc.want[0].Port) {
				t.Errorf("url = %s", u)
			}
		})
	}
}

// TestDesiredHPA: no autoscaling, no HPA; with it, once the HPA exists the Deployment carries no count, the HPA
// scales it between the bounds on the targets asked for (CPU 80% when none is), and a PDB exists when the HPA may
// run two pods or more.
func TestDesiredHPA(t *testing.T) {
	cases := []struct {
		name    string
		a       *webappv2.Autoscaling
		metrics []string // resource:utilization
		min     int32
		pdb     bool
	}{
		{"off", nil, nil, 0, false},
		{"default target", &webappv2.Autoscaling{MaxReplicas: 5}, []string{"cpu:80"}, 1, true},
		{"both targets", &webappv2.Autoscaling{MinReplicas: ptr.To(int32(2)), MaxReplicas: 9, TargetCPUUtilizationPercentage: ptr.To(int32(50)), TargetMemoryUtilizationPercentage: ptr.To(int32(70))}, []string{"cpu:50", "memory:70"}, 2, true},
		{"memory only, one pod", &webappv2.Autoscaling{MaxReplicas: 1, TargetMemoryUtilizationPercentage: ptr.To(int32(60))}, []string{"memory:60"}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 1, 80, "nginx")
			app.Spec.Autoscaling = tc.a
			ac, err := HPA(app, 0)
			if err != nil {
				t.Fatal(err)
			}
			dac, err := Deployment(app, Inputs{HPAExists: true})
			if err != nil {
				t.Fatal(err)
			}
			d := apptest.Typed[appsv1.Deployment](t, dac)
			if tc.a == nil {
				if ac != nil || d.Spec.Replicas == nil {
					t.Fatalf("without autoscaling: HPA %v, Deployment replicas %v", ac, d.Spec.Replicas)
				}
				return
			}
			if d.Spec.Replicas != nil {
				t.Errorf("with autoscaling the Deployment carries replicas %d", *d.Spec.Replicas)
			}
			h := apptest.Typed[autoscalingv2.HorizontalPodAutoscaler](t, ac)
			if h.Spec.ScaleTargetRef != (autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"}) ||
				ptr.Deref(h.Spec.MinReplicas, 0) != tc.min || h.Spec.MaxReplicas != tc.a.MaxReplicas {
				t.Errorf("spec = %+v", h.Spec)
			}
			var got []string
			for _, m := range h.Spec.Metrics {
				got = append(got, fmt.Sprintf("%s:%d", m.Resource.Name, ptr.Deref(m.Resource.Target.AverageUtilization, 0)))
			}
			if !slices.Equal(got, tc.metrics) {
				t.Errorf("metrics = %v, want %v", got, tc.metrics)
			}
			apptest.CheckOwner(t, h.OwnerReferences, app)
			if (PDB(app) != nil) != tc.pdb {
				t.Errorf("PDB = %v, want %v", PDB(app) != nil, tc.pdb)
			}
		})
	}
}

// TestDesiredDeploymentCreatedUnderAnHPA: a Deployment the apply creates (new, or deleted by someone) while the HPA
// decides the count gets the WebApp's count in the HPA's range, not the API's default of 1; one that exists leaves
// the count to the HPA.
func TestDesiredDeploymentCreatedUnderAnHPA(t *testing.T) {
	cases := []struct {
		name      string
		replicas  *int32
		hpaExists bool
		missing   bool
		want      *int32
	}{
		{"the HPA exists, the Deployment too", ptr.To(int32(1)), true, false, nil},
		{"the HPA exists, the Deployment missing: below minReplicas", ptr.To(int32(1)), true, true, ptr.To(int32(3))},
		{"the HPA exists, the Deployment missing: above maxReplicas", ptr.To(int32(9)), true, true, ptr.To(int32(6))},
		{"no HPA, the Deployment missing", ptr.To(int32(4)), false, true, ptr.To(int32(4))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 1, 80, "nginx")
			app.Spec.Replicas, app.Spec.Autoscaling = tc.replicas, &webappv2.Autoscaling{MinReplicas: ptr.To(int32(3)), MaxReplicas: 6}
			ac, err := Deployment(app, Inputs{HPAExists: tc.hpaExists, DeploymentMissing: tc.missing})
			if err != nil {
				t.Fatal(err)
			}
			if got := apptest.Typed[appsv1.Deployment](t, ac).Spec.Replicas; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("replicas = %v, want %v", ptr.Deref(got, -1), ptr.Deref(tc.want, -1))
			}
		})
	}
}

// TestAHeldCountIsTheHPAsFloor: a blue/green's count held at its switch raises the HPA's minReplicas, within its
// maximum; nothing held leaves the spec's.
func TestAHeldCountIsTheHPAsFloor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		min, held int32
		want      int32
	}{
		{"nothing held", 2, 0, 2},
		{"held above the spec's floor", 2, 6, 6},
		{"held below it", 4, 3, 4},
		{"held above the maximum", 2, 50, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 1, 80, "nginx")
			app.Spec.Autoscaling = &webappv2.Autoscaling{MinReplicas: ptr.To(tc.min), MaxReplicas: 12}
			ac, err := HPA(app, tc.held)
			if err != nil {
				t.Fatal(err)
			}
			if h := apptest.Typed[autoscalingv2.HorizontalPodAutoscaler](t, ac); ptr.Deref(h.Spec.MinReplicas, 0) != tc.want || h.Spec.MaxReplicas != 12 {
				t.Errorf("minReplicas %v, maxReplicas %d: want %d, 12", h.Spec.MinReplicas, h.Spec.MaxReplicas, tc.want)
			}
		})
	}
}
