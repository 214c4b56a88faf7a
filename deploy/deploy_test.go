// Package deploy checks the deployment files beside it: the Kubernetes
// manifests decode strictly into the API types (an unknown or misspelt
// field fails), and the workers' pods have the probes, security context,
// data volume, instance id and secrets the docs promise. The Kubernetes
// modules are imported here only, never by the binary.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes one YAML document into obj the way the API server
// reads a strict request: duplicate keys, unknown fields and fields whose
// case differs from the type's (readOnlyRootFileSystem) are errors, each
// named.
func decodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// manifest is one decoded YAML document and where it came from.
type manifest struct {
	file string
	doc  int
	obj  any
}

func (m manifest) String() string { return fmt.Sprintf("%s (document %d)", m.file, m.doc) }

// kustomization is the part of kustomize's file the manifests use;
// decoded strictly too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// newObject returns the API type of a document's apiVersion and kind.
func newObject(tm metav1.TypeMeta) (any, error) {
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		return &corev1.Namespace{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "batch/v1 Job":
		return &batchv1.Job{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a type this test knows (add it to newObject)", tm.APIVersion, tm.Kind)
}

// splitDocs splits a YAML stream on its "---" lines, dropping documents
// that hold only comments and blank lines.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		for _, line := range strings.Split(cur.String(), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, slices.Clone(cur.Bytes()))
				break
			}
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if strings.TrimRight(sc.Text(), " ") == "---" {
			flush()
			continue
		}
		cur.WriteString(sc.Text())
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

// decodeFile decodes every document of a manifest file strictly into its
// API type.
func decodeFile(path string, b []byte) ([]manifest, error) {
	var out []manifest
	for i, doc := range splitDocs(b) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i+1, err)
		}
		obj, err := newObject(tm)
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i+1, err)
		}
		if err := decodeStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): %w", path, i+1, tm.Kind, err)
		}
		out = append(out, manifest{file: path, doc: i + 1, obj: obj})
	}
	return out, nil
}

// loadManifests decodes every YAML file under dir: kustomization.yaml into
// kustomization (its resources must be the other files of its directory),
// every other file into the Kubernetes API types.
func loadManifests(t *testing.T, dir string) []manifest {
	t.Helper()
	var all []manifest
	listed := map[string][]string{} // directory -> files its kustomization lists
	files := map[string][]string{}  // directory -> manifest files in it
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" {
			var k kustomization
			if err := decodeStrict(b, &k); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if k.Kind != "Kustomization" || k.Namespace == "" {
				return fmt.Errorf("%s: kind %q namespace %q: want a Kustomization with a namespace", path, k.Kind, k.Namespace)
			}
			listed[filepath.Dir(path)] = k.Resources
			return nil
		}
		files[filepath.Dir(path)] = append(files[filepath.Dir(path)], d.Name())
		ms, err := decodeFile(path, b)
		all = append(all, ms...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for d, names := range files {
		want, have := slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(listed[d]))
		if !slices.Equal(want, have) {
			t.Errorf("%s/kustomization.yaml lists %v, the directory holds %v", d, have, want)
		}
	}
	return all
}

func TestManifestsDecodeStrictly(t *testing.T) {
	ms := loadManifests(t, "kubernetes")
	if len(ms) == 0 {
		t.Fatal("no manifests under kubernetes/")
	}
}

// TestStrictDecodingRefusesAMisspeltField is the check of the check: a
// misspelt field in a real manifest must fail the decode.
func TestStrictDecodingRefusesAMisspeltField(t *testing.T) {
	b, err := os.ReadFile("kubernetes/verdryx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{"readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"periodSeconds:", "periodSecond:"},
		{"volumeClaimTemplates:", "volumeClaimTemplate:"},
	} {
		if !bytes.Contains(b, []byte(c.from)) {
			t.Fatalf("verdryx.yaml has no %q to misspell", c.from)
		}
		bad := bytes.Replace(b, []byte(c.from), []byte(c.to), 1)
		if _, err := decodeFile("verdryx.yaml", bad); err == nil || !strings.Contains(err.Error(), strings.TrimSuffix(c.to, ":")) {
			t.Errorf("%s misspelt as %s: want an error naming it, have %v", c.from, c.to, err)
		}
	}
}

// podSpecs returns every pod template of the manifests, by workload.
func podSpecs(ms []manifest) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *appsv1.StatefulSet:
			out["StatefulSet/"+o.Name] = &o.Spec.Template
		case *batchv1.Job:
			out["Job/"+o.Name] = &o.Spec.Template
		}
	}
	return out
}

func find[T any](t *testing.T, ms []manifest, name func(T) string, want string) T {
	t.Helper()
	for _, m := range ms {
		if o, ok := m.obj.(T); ok && name(o) == want {
			return o
		}
	}
	var zero T
	t.Fatalf("no %T named %s in the manifests", zero, want)
	return zero
}

// flagValue returns the value of --name=value in args ("", false if absent).
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "", true
		}
	}
	return "", false
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// containerfile returns the instructions of deploy/Containerfile (the
// first word of each non-comment line, upper-cased, and the rest).
func containerfile(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		out[strings.ToUpper(instr)] = append(out[strings.ToUpper(instr)], strings.TrimSpace(rest))
	}
	return out
}

func TestContainerfile(t *testing.T) {
	cf := containerfile(t)
	if have := cf["FROM"]; !slices.Equal(have, []string{"scratch"}) {
		t.Errorf("FROM %v: want scratch only (builds offline, nothing but the binary)", have)
	}
	if len(cf["RUN"]) > 0 {
		t.Errorf("RUN %v: a scratch image has no shell", cf["RUN"])
	}
	user := cf["USER"]
	if len(user) != 1 || !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(user[0]) {
		t.Errorf("USER %v: want one numeric non-root uid:gid", user)
	}
	if have := cf["ENTRYPOINT"]; !slices.Equal(have, []string{`["/verdryx", "serve"]`}) {
		t.Errorf("ENTRYPOINT %v: want serve", have)
	}
	for _, e := range append(cf["ENV"], cf["ARG"]...) {
		if secretName.MatchString(strings.Fields(strings.ReplaceAll(e, "=", " "))[0]) {
			t.Errorf("ENV/ARG %s: a secret baked into the image", e)
		}
	}
}

// secretName matches the names of environment variables that hold
// secrets: their values must come from a Secret, never be written inline.
var secretName = regexp.MustCompile(`(?i)(KEY|PASSWORD|TOKEN|SECRET|SEED)$`)

func TestWorkerPods(t *testing.T) {
	ms := loadManifests(t, "kubernetes")
	cf := containerfile(t)
	sts := find(t, ms, func(s *appsv1.StatefulSet) string { return s.Name }, "verdryx")
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("verdryx pods have %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 {
		t.Errorf("command %v: the workers run the image's entrypoint (serve)", c.Command)
	}

	// --http listens beyond loopback (the kubelet probes the pod's IP),
	// which serve refuses without --http-public.
	httpAddr, ok := flagValue(c.Args, "http")
	if !ok {
		t.Fatal("no --http=ADDR in the worker's args: serve listens on loopback, unreachable by the probes")
	}
	host, portStr, _ := strings.Cut(httpAddr, ":")
	httpPort, err := strconv.Atoi(portStr)
	if err != nil || host == "127.0.0.1" || host == "localhost" {
		t.Errorf("--http=%s: want a non-loopback host:port", httpAddr)
	}
	if _, ok := flagValue(c.Args, "http-public"); !ok {
		t.Errorf("--http=%s without --http-public: serve refuses to start", httpAddr)
	}
	namedPort := map[string]int32{}
	for _, p := range c.Ports {
		namedPort[p.Name] = p.ContainerPort
	}
	probe := func(what string, p *corev1.Probe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: want an HTTP probe of %s", what, path)
			return
		}
		port := p.HTTPGet.Port.IntVal
		if p.HTTPGet.Port.StrVal != "" {
			port = namedPort[p.HTTPGet.Port.StrVal]
		}
		if p.HTTPGet.Path != path || int(port) != httpPort {
			t.Errorf("%s: %s on port %d, want %s on --http's port %d", what, p.HTTPGet.Path, port, path, httpPort)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	// A configuration error (exit 2) is not restarted; anything else is.
	restarts := func(code int32) bool {
		for _, r := range c.RestartPolicyRules {
			if r.ExitCodes != nil && r.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpIn && slices.Contains(r.ExitCodes.Values, code) ||
				r.ExitCodes != nil && r.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpNotIn && !slices.Contains(r.ExitCodes.Values, code) {
				return r.Action == corev1.ContainerRestartRuleActionRestart
			}
		}
		return c.RestartPolicy == nil || *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	}
	for code, want := range map[int32]bool{0: true, 1: true, 2: false, 3: true, 137: true} {
		if restarts(code) != want {
			t.Errorf("exit %d: restarted %v, want %v (exit 2 is a configuration error, which a restart does not fix)", code, !want, want)
		}
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy %q: want FallbackToLogsOnError, so the error of an exit shows in the pod's status", c.TerminationMessagePolicy)
	}

	// The data directory is the volume claim of each pod.
	data, ok := flagValue(c.Args, "data")
	if !ok {
		t.Fatal("no --data=DIR in the worker's args")
	}
	if !slices.Contains(cf["VOLUME"], `["`+data+`"]`) {
		t.Errorf("--data=%s is not the Containerfile's VOLUME %v", data, cf["VOLUME"])
	}
	var claims []string
	for _, vct := range sts.Spec.VolumeClaimTemplates {
		claims = append(claims, vct.Name)
	}
	mountedClaim := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == data {
			mountedClaim = slices.Contains(claims, m.Name) && !m.ReadOnly
		}
	}
	if !mountedClaim {
		t.Errorf("--data=%s is not a writable mount of a volume claim template (%v)", data, claims)
	}

	// The instance id is the pod's name.
	inst, _ := flagValue(c.Args, "instance")
	ref := regexp.MustCompile(`^\$\(([A-Z_]+)\)$`).FindStringSubmatch(inst)
	if ref == nil {
		t.Fatalf("--instance=%q: want $(VAR) of the pod's name", inst)
	}
	if e := envVar(c, ref[1]); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("--instance=%s: $%s is not the downward API's metadata.name", inst, ref[1])
	}

	// The replicas verdryx creates streams and buckets with are the
	// JetStream cluster's nodes; the partitions are the server mapping's.
	nats := find(t, ms, func(s *appsv1.StatefulSet) string { return s.Name }, "nats")
	if r, _ := flagValue(c.Args, "replicas"); r != "3" || nats.Spec.Replicas == nil || *nats.Spec.Replicas != 3 {
		t.Errorf("--replicas=%s against %v NATS nodes: want R3 on three nodes", r, nats.Spec.Replicas)
	}
	conf := find(t, ms, func(c *corev1.ConfigMap) string { return c.Name }, "nats-config").Data["nats.conf"]
	parts, _ := flagValue(c.Args, "partitions")
	if !strings.Contains(conf, "{{partition("+parts+",1)}}") || !strings.Contains(conf, "jetstream") {
		t.Errorf("nats.conf: want jetstream and the traces mapping to --partitions=%s partitions", parts)
	}
	if n := len(regexp.MustCompile(`nats://nats-[0-9]\.[a-z.]+:6222`).FindAllString(conf, -1)); n != 3 {
		t.Errorf("nats.conf has %d routes, want 3", n)
	}

	// NATS credentials are a Secret's file, where NATS_CREDS points.
	creds := envVar(c, "NATS_CREDS")
	if creds == nil || creds.Value == "" {
		t.Fatal("no NATS_CREDS path in the worker's env")
	}
	fromSecret := false
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(creds.Value, m.MountPath+"/") {
			for _, v := range pod.Volumes {
				fromSecret = fromSecret || (v.Name == m.Name && v.Secret != nil && m.ReadOnly)
			}
		}
	}
	if !fromSecret {
		t.Errorf("NATS_CREDS=%s is not in a read-only Secret volume", creds.Value)
	}

	// Model keys are files too: the Secret verdryx-model-keys, mounted
	// read-only where the manifest's comment tells --openai-key-file and
	// --anthropic-key-file to look, and no key in the environment.
	keysMounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			keysMounted = keysMounted || (v.Name == m.Name && m.MountPath == "/etc/verdryx/model-keys" && m.ReadOnly &&
				v.Secret != nil && v.Secret.SecretName == "verdryx-model-keys")
		}
	}
	if !keysMounted {
		t.Error("the model keys are not the Secret verdryx-model-keys mounted read-only at /etc/verdryx/model-keys")
	}
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		if envVar(c, k) != nil {
			t.Errorf("%s is in the worker's environment: mount it as a file (--openai-key-file, --anthropic-key-file)", k)
		}
	}

	// Memory: the limit holds the measured peak of a 10 M-row backlog
	// (1.1 GiB, docs/deploy.md) and GOMEMLIMIT is under the limit.
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if limit.Cmp(resource.MustParse("1200Mi")) < 0 {
		t.Errorf("memory limit %s: under the measured peak of 1.1 GiB", limit.String())
	}
	gml := envVar(c, "GOMEMLIMIT")
	if gml == nil {
		t.Fatal("no GOMEMLIMIT")
	}
	soft, err := resource.ParseQuantity(strings.TrimSuffix(gml.Value, "B"))
	if err != nil || soft.Cmp(limit) >= 0 {
		t.Errorf("GOMEMLIMIT=%s: want a size under the memory limit %s (%v)", gml.Value, limit.String(), err)
	}

	// The metrics Service selects these pods and says where to scrape.
	svc := find(t, ms, func(s *corev1.Service) string { return s.Name }, sts.Spec.ServiceName)
	for k, v := range svc.Spec.Selector {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, the pods do not have it", svc.Name, k, v)
		}
	}
	want := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": strconv.Itoa(httpPort), "prometheus.io/path": "/metrics"}
	for k, v := range want {
		if svc.Annotations[k] != v || sts.Spec.Template.Annotations[k] != v {
			t.Errorf("annotation %s: Service %q, pods %q, want %q", k, svc.Annotations[k], sts.Spec.Template.Annotations[k], v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != int32(httpPort) {
		t.Errorf("Service %s ports %v: want --http's %d", svc.Name, svc.Spec.Ports, httpPort)
	}
}

func TestEvalJob(t *testing.T) {
	ms := loadManifests(t, "kubernetes")
	job := find(t, ms, func(j *batchv1.Job) string { return j.Name }, "verdryx-eval")
	c := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/verdryx"}) || !slices.Contains(c.Args, "eval") {
		t.Errorf("command %v args %v: want /verdryx ... eval", c.Command, c.Args)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
		t.Errorf("backoffLimit %d: a retried eval pays for its calls again; want 0", ptrValue(job.Spec.BackoffLimit))
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s: want Never", job.Spec.Template.Spec.RestartPolicy)
	}
}

// TestPodsAreConfined holds every pod (workers, NATS, the eval Job) to the
// restricted profile: non-root, no privilege escalation, no capabilities,
// a read-only root filesystem, the runtime's seccomp profile, and
// requests and limits.
func TestPodsAreConfined(t *testing.T) {
	ms := loadManifests(t, "kubernetes")
	pods := podSpecs(ms)
	if len(pods) < 3 {
		t.Fatalf("pods of %v: want the workers, NATS and the eval Job", slices.Sorted(maps.Keys(pods)))
	}
	for name, tpl := range pods {
		ps := tpl.Spec.SecurityContext
		if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
			t.Errorf("%s: pod securityContext must set runAsNonRoot and a non-zero runAsUser", name)
		}
		if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: want seccompProfile RuntimeDefault", name)
		}
		for _, c := range append(slices.Clone(tpl.Spec.InitContainers), tpl.Spec.Containers...) {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s/%s: no securityContext", name, c.Name)
				continue
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s/%s: want allowPrivilegeEscalation false", name, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s/%s: want readOnlyRootFilesystem true", name, c.Name)
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s/%s: want capabilities drop ALL, none added", name, c.Name)
			case sc.Privileged != nil && *sc.Privileged:
				t.Errorf("%s/%s: privileged", name, c.Name)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s/%s: no %s request", name, c.Name, r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("%s/%s: no %s limit", name, c.Name, r)
				}
			}
		}
	}
}

// inlineSecrets returns what is written inline that should come from a
// Secret: a committed Secret object, a ConfigMap value that looks like a
// password, token, seed or private key, an environment variable named like
// a secret whose value is not a secretKeyRef, an argument passing a
// password, token or key.
func inlineSecrets(ms []manifest) []string {
	var problems []string
	looksSecret := regexp.MustCompile(`(?i)(password|token|seed|BEGIN [A-Z ]*PRIVATE KEY)`)
	for _, m := range ms {
		if s, ok := m.obj.(*corev1.Secret); ok {
			problems = append(problems, fmt.Sprintf("%s: Secret %s is committed; create it with kubectl create secret instead", m, s.Name))
		}
		if cm, ok := m.obj.(*corev1.ConfigMap); ok {
			for k, v := range cm.Data {
				if looksSecret.MatchString(v) {
					problems = append(problems, fmt.Sprintf("%s: ConfigMap %s key %s holds what looks like a secret", m, cm.Name, k))
				}
			}
		}
	}
	inlineFlag := regexp.MustCompile(`^--(nats-password|nats-token|[a-z-]*-key)(=|$)`)
	for name, tpl := range podSpecs(ms) {
		for _, c := range append(slices.Clone(tpl.Spec.InitContainers), tpl.Spec.Containers...) {
			for _, e := range c.Env {
				if secretName.MatchString(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					problems = append(problems, fmt.Sprintf("%s/%s: env %s is not from a Secret (secretKeyRef)", name, c.Name, e.Name))
				}
			}
			for _, a := range append(slices.Clone(c.Command), c.Args...) {
				if inlineFlag.MatchString(a) {
					problems = append(problems, fmt.Sprintf("%s/%s: argument %s passes a secret on the command line", name, c.Name, a))
				}
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// TestNoSecretValueInline: the Secrets are made with kubectl create secret
// (docs/deploy.md) and only referenced by the manifests.
func TestNoSecretValueInline(t *testing.T) {
	for _, p := range inlineSecrets(loadManifests(t, "kubernetes")) {
		t.Error(p)
	}
}

// TestInlineSecretsAreFound breaks copies of the workers' manifest in the
// ways inlineSecrets guards against, and wants each one found.
func TestInlineSecretsAreFound(t *testing.T) {
	b, err := os.ReadFile("kubernetes/verdryx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secret := "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: verdryx-model-keys\nstringData:\n  OPENAI_API_KEY: \"\"\n"
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"key inline", func(b []byte) []byte {
			return regexp.MustCompile(`(?m)^(\s+)- name: GOMEMLIMIT\n`).
				ReplaceAll(b, []byte("${1}- name: OPENAI_API_KEY\n${1}  value: sk-inline\n${1}- name: GOMEMLIMIT\n"))
		}, "env OPENAI_API_KEY is not from a Secret"},
		{"secret committed", func(b []byte) []byte { return append(slices.Clone(b), secret...) }, "Secret verdryx-model-keys is committed"},
		{"password argument", func(b []byte) []byte {
			return bytes.Replace(b, []byte("- --http-public\n"), []byte("- --http-public\n            - --nats-password=hunter2\n"), 1)
		}, "argument --nats-password=hunter2"},
	} {
		bad := c.edit(b)
		if bytes.Equal(bad, b) {
			t.Fatalf("%s: the edit changed nothing", c.name)
		}
		ms, err := decodeFile("verdryx.yaml", bad)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if have := strings.Join(inlineSecrets(ms), "\n"); !strings.Contains(have, c.want) {
			t.Errorf("%s: want a problem with %q, have %q", c.name, c.want, have)
		}
	}
}

// ptrValue returns *p, or -1 when p is nil.
func ptrValue(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// TestSystemdUnitDoesNotRestartAConfigurationError holds the unit to
// Restart=on-failure without restarting on exit 2 (a bad flag or config,
// which a restart does not fix).
func TestSystemdUnitDoesNotRestartAConfigurationError(t *testing.T) {
	b, err := os.ReadFile("systemd/verdryx.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = append(keys[k], v)
		}
	}
	if !slices.Equal(keys["Restart"], []string{"on-failure"}) {
		t.Errorf("Restart=%v: want on-failure", keys["Restart"])
	}
	prevented := false
	for _, v := range keys["RestartPreventExitStatus"] {
		prevented = prevented || slices.Contains(strings.Fields(v), "2")
	}
	if !prevented {
		t.Errorf("RestartPreventExitStatus=%v: want 2 among them", keys["RestartPreventExitStatus"])
	}
}
