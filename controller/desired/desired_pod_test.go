package desired

import (
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

// Each field of the rest of the pod reaches the pod template as the table says; the first case is the promise of
// an upgrade: a WebApp that sets none of them gets the pod template earlier releases built, field for field.
func TestDesiredPodTemplateAdditions(t *testing.T) {
	cases := []struct {
		name  string
		set   func(*webappv2.WebAppSpec)
		check func(t *testing.T, d *appsv1.Deployment, p corev1.PodSpec, c corev1.Container)
	}{
		{"none set: nothing added", func(*webappv2.WebAppSpec) {}, func(t *testing.T, d *appsv1.Deployment, p corev1.PodSpec, _ corev1.Container) {
			want := `{"containers":[{"name":"app","image":"nginx","ports":[{"name":"http","containerPort":80,"protocol":"TCP"}],"resources":{},` +
				`"readinessProbe":{"tcpSocket":{"port":"http"}},"securityContext":{"capabilities":{"drop":["ALL"]},"allowPrivilegeEscalation":false}}],` +
				`"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}}}`
			if got, _ := json.Marshal(p); string(got) != want {
				t.Errorf("pod spec\n got %s\nwant %s", got, want)
			}
			if d.Spec.Strategy.Type != "" {
				t.Errorf("strategy = %+v", d.Spec.Strategy)
			}
		}},
		{"volumes of each source, in order, with mounts", func(s *webappv2.WebAppSpec) {
			s.Volumes = []webappv2.Volume{
				{Name: "config", ConfigMap: &webappv2.ConfigMapVolume{Name: "cm", Items: []webappv2.KeyToPath{{Key: "a", Path: "conf/a", Mode: ptr.To[int32](0o400)}}, DefaultMode: ptr.To[int32](0o644), Optional: ptr.To(true)}},
				{Name: "creds", Secret: &webappv2.SecretVolume{Name: "s"}},
				{Name: "scratch", EmptyDir: &webappv2.EmptyDirVolume{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To[webappv2.StorageSize]("64Mi")}},
				{Name: "shared", PersistentVolumeClaim: &webappv2.ClaimReference{ClaimName: "files", ReadOnly: true}},
				{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteMany}},
			}
			s.Container.VolumeMounts = []webappv2.VolumeMount{{Name: "config", MountPath: "/etc/app", SubPath: "conf", ReadOnly: true}, {Name: "config", MountPath: "/etc/again"}}
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, c corev1.Container) {
			want := []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"},
					Items: []corev1.KeyToPath{{Key: "a", Path: "conf/a", Mode: ptr.To[int32](0o400)}}, DefaultMode: ptr.To[int32](0o644), Optional: ptr.To(true)}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
				{Name: "shared", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "files", ReadOnly: true}}},
				// The owned claim has the WebApp's name.
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}},
			}
			if !reflect.DeepEqual(p.Volumes, want) {
				t.Errorf("volumes\n got %+v\nwant %+v", p.Volumes, want)
			}
			wantMounts := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app", SubPath: "conf", ReadOnly: true}, {Name: "config", MountPath: "/etc/again"}}
			if !reflect.DeepEqual(c.VolumeMounts, wantMounts) {
				t.Errorf("mounts = %+v", c.VolumeMounts)
			}
		}},
		{"read-only root with writable paths", func(s *webappv2.WebAppSpec) {
			s.Container.ReadOnlyRootFilesystem = true
			s.Container.WritablePaths = []webappv2.AbsolutePath{"/tmp", "/var/cache/nginx"}
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, c corev1.Container) {
			if sc := c.SecurityContext; sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil {
				t.Errorf("security context = %+v", sc)
			}
			wantVols := []corev1.Volume{{Name: "webapp-writable-0", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "webapp-writable-1", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			if !reflect.DeepEqual(p.Volumes, wantVols) {
				t.Errorf("volumes = %+v", p.Volumes)
			}
			wantMounts := []corev1.VolumeMount{{Name: "webapp-writable-0", MountPath: "/tmp"}, {Name: "webapp-writable-1", MountPath: "/var/cache/nginx"}}
			if !reflect.DeepEqual(c.VolumeMounts, wantMounts) {
				t.Errorf("mounts = %+v", c.VolumeMounts)
			}
		}},
		{"a single-writer claim rolls out by Recreate", func(s *webappv2.WebAppSpec) {
			s.Replicas = nil
			s.Volumes = []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi", AccessMode: corev1.ReadWriteOncePod}}}
		}, func(t *testing.T, d *appsv1.Deployment, _ corev1.PodSpec, _ corev1.Container) {
			if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
				t.Errorf("strategy = %+v", d.Spec.Strategy)
			}
		}},
		{"drain, grace, startup probe", func(s *webappv2.WebAppSpec) {
			s.Container.DrainSeconds = 5
			s.Pod.TerminationGracePeriodSeconds = ptr.To[int64](20)
			s.Container.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}, FailureThreshold: 30}
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, c corev1.Container) {
			if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 5 || l.PreStop.Exec != nil {
				t.Errorf("lifecycle = %+v", c.Lifecycle)
			}
			if p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds != 20 {
				t.Errorf("grace = %v", p.TerminationGracePeriodSeconds)
			}
			if c.StartupProbe == nil || c.StartupProbe.FailureThreshold != 30 {
				t.Errorf("startup probe = %+v", c.StartupProbe)
			}
		}},
		{"identity and placement", func(s *webappv2.WebAppSpec) {
			s.Pod.ServiceAccountName = "sa"
			s.Pod.AutomountServiceAccountToken = ptr.To(false)
			s.Pod.NodeSelector = map[string]string{"pool": "web"}
			s.Pod.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}}
			s.Pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpExists}}}}}}}
			s.Pod.PriorityClassName = "high"
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, _ corev1.Container) {
			if p.ServiceAccountName != "sa" || p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken || p.NodeSelector["pool"] != "web" ||
				len(p.Tolerations) != 1 || p.Tolerations[0].Value != "web" || p.Affinity == nil || p.Affinity.NodeAffinity == nil || p.PriorityClassName != "high" {
				t.Errorf("pod spec = %+v", p)
			}
		}},
		{"spread across zones, required", func(s *webappv2.WebAppSpec) {
			s.Pod.Spread = &webappv2.Spread{Across: webappv2.SpreadZones, Required: true}
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, _ corev1.Container) {
			want := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: "x"}},
				MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey}}}
			if !reflect.DeepEqual(p.TopologySpreadConstraints, want) {
				t.Errorf("constraints = %+v", p.TopologySpreadConstraints)
			}
		}},
		{"spread across nodes, preferred, skew 2", func(s *webappv2.WebAppSpec) {
			s.Pod.Spread = &webappv2.Spread{Across: webappv2.SpreadNodes, MaxSkew: 2}
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, _ corev1.Container) {
			if c := p.TopologySpreadConstraints; len(c) != 1 || c[0].TopologyKey != corev1.LabelHostname || c[0].MaxSkew != 2 || c[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
				t.Errorf("constraints = %+v", c)
			}
		}},
		{"init container and sidecar, under the pods' standard", func(s *webappv2.WebAppSpec) {
			s.Volumes = []webappv2.Volume{{Name: "scratch", EmptyDir: &webappv2.EmptyDirVolume{}}}
			s.Pod.InitContainers = []webappv2.ExtraContainer{
				{Name: "migrate", Image: "tool:1", Command: []string{"migrate"}, VolumeMounts: []webappv2.VolumeMount{{Name: "scratch", MountPath: "/work"}}},
				{Name: "proxy", Image: "proxy:1", RestartPolicy: corev1.ContainerRestartPolicyAlways,
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}},
			}
		}, func(t *testing.T, _ *appsv1.Deployment, p corev1.PodSpec, _ corev1.Container) {
			ic := p.InitContainers
			if len(ic) != 2 || ic[0].Name != "migrate" || ic[0].RestartPolicy != nil || len(ic[0].VolumeMounts) != 1 ||
				ic[1].Name != "proxy" || ic[1].RestartPolicy == nil || *ic[1].RestartPolicy != corev1.ContainerRestartPolicyAlways || ic[1].ReadinessProbe == nil {
				t.Fatalf("init containers = %+v", ic)
			}
			for _, c := range ic {
				if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil {
					t.Errorf("%s: security context = %+v", c.Name, sc)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 2, 80, "nginx")
			tc.set(&app.Spec)
			ac, err := Deployment(app, Inputs{})
			if err != nil {
				t.Fatal(err)
			}
			d := apptest.Typed[appsv1.Deployment](t, ac)
			tc.check(t, d, d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0])
		})
	}
}

// The owned claim: none without a claim volume; otherwise named after the WebApp, with its size in the server's
// form, its access mode (ReadWriteOnce when unset) and class, and kept on deletion unless its policy is Delete.
func TestDesiredClaim(t *testing.T) {
	cases := []struct {
		name     string
		claim    *webappv2.OwnedClaim
		wantMode corev1.PersistentVolumeAccessMode
		wantSize string
		class    *string
		kept     bool
	}{
		{"none", nil, "", "", nil, false},
		{"defaults", &webappv2.OwnedClaim{Size: "1Gi"}, corev1.ReadWriteOnce, "1Gi", nil, true},
		{"a class, many writers, deleted with the WebApp", &webappv2.OwnedClaim{Size: "1.5Gi", StorageClassName: ptr.To("fast"),
			AccessMode: corev1.ReadWriteMany, DeletionPolicy: webappv2.ClaimDelete}, corev1.ReadWriteMany, "1536Mi", ptr.To("fast"), false},
		{"no class (static volumes), a size below milli precision rounded up", &webappv2.OwnedClaim{Size: "0.0010001", StorageClassName: ptr.To(""),
			DeletionPolicy: webappv2.ClaimRetain}, corev1.ReadWriteOnce, "2m", ptr.To(""), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 1, 80, "nginx")
			if tc.claim != nil {
				app.Spec.Volumes = []webappv2.Volume{{Name: "data", Claim: tc.claim}}
			}
			ac := Claim(app)
			if ClaimKept(app) != tc.kept {
				t.Errorf("kept = %v", !tc.kept)
			}
			if tc.claim == nil {
				if ac != nil {
					t.Fatalf("claim = %+v", ac)
				}
				return
			}
			c := apptest.Typed[corev1.PersistentVolumeClaim](t, ac)
			size := c.Spec.Resources.Requests[corev1.ResourceStorage]
			if c.Name != "x" || len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != tc.wantMode || size.String() != tc.wantSize ||
				!reflect.DeepEqual(c.Spec.StorageClassName, tc.class) || len(c.OwnerReferences) != 1 || c.Labels[webappv2.LabelManagedBy] != webappv2.ManagedBy {
				t.Errorf("claim = %+v (size %s)", c, size.String())
			}
		})
	}
}
