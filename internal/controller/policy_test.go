package controller

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// policyObjects reads the shipped admission policy and binding from config/policy, so
// that what is tested is what `make deploy` installs.
func policyObjects() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	var (
		pol *admissionregistrationv1.ValidatingAdmissionPolicy
		bnd *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	)
	for _, doc := range configDocs("policy", "policy.yaml") {
		var tm metav1.TypeMeta
		ExpectWithOffset(1, yaml.Unmarshal(doc, &tm)).To(Succeed())
		switch tm.Kind {
		case "":
		case "ValidatingAdmissionPolicy":
			pol = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			ExpectWithOffset(1, yaml.Unmarshal(doc, pol)).To(Succeed())
		case "ValidatingAdmissionPolicyBinding":
			bnd = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			ExpectWithOffset(1, yaml.Unmarshal(doc, bnd)).To(Succeed())
		default:
			Fail("unexpected kind in config/policy/policy.yaml: " + tm.Kind)
		}
	}
	ExpectWithOffset(1, pol).NotTo(BeNil())
	ExpectWithOffset(1, bnd).NotTo(BeNil())
	ExpectWithOffset(1, bnd.Spec.PolicyName).To(Equal(pol.Name))
	return pol, bnd
}

// configDocs reads the YAML documents of a file under config/ (path parts below it).
func configDocs(path ...string) [][]byte {
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "config"}, path...)...))
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	var docs [][]byte
	rd := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		ExpectWithOffset(2, err).NotTo(HaveOccurred())
		docs = append(docs, doc)
	}
}

// impersonating is a client acting as the user (no groups but system:authenticated).
func impersonating(user string) client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return cl
}

// grant binds a new Role with the rules to the user in the namespace.
func grant(ns, user, name string, rules ...rbacv1.PolicyRule) {
	ExpectWithOffset(1, k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + user}, Rules: rules,
	})).To(Succeed())
	ExpectWithOffset(1, k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name + "-" + user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
}

var (
	ruleLCJ = rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"lockedcronjobs"},
		Verbs: []string{"get", "list", "create", "update", "patch"}}
	rulePods        = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}
	ruleRedisSecret = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"redis"}}
)

var _ = Describe("Admission policy (config/policy): a LockedCronJob grants nothing its author could not do", Ordered, func() {
	var ns string

	BeforeAll(func() {
		pol, bnd := policyObjects()
		Expect(k8sClient.Create(ctx, pol)).To(Succeed())
		Expect(k8sClient.Create(ctx, bnd)).To(Succeed())
		// Installed for this Describe only: other specs act as cluster admin, who passes
		// anyway, but their own policies should not have to reckon with this one.
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, bnd))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pol))).To(Succeed())
		})

		ns = newNamespace() // holds Secret "redis"
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
			StringData: map[string]string{"url": "redis://other:6379"},
		})).To(Succeed())
		grant(ns, "no-pods", "lcj", ruleLCJ)
		grant(ns, "no-pods", "redis-secret", ruleRedisSecret)
		grant(ns, "both", "lcj", ruleLCJ)
		grant(ns, "both", "pods", rulePods)
		grant(ns, "both", "redis-secret", ruleRedisSecret)
		grant(ns, "no-secret", "lcj", ruleLCJ)
		grant(ns, "no-secret", "pods", rulePods)
		grant(ns, "watcher", "lcj", ruleLCJ)
		grant(ns, "watcher", "pods", rulePods)
		grant(ns, "watcher", "redis-secret", ruleRedisSecret)
		grant(ns, "watcher", "deployments", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list"}})

		// The apiserver type-checks and compiles a new policy before it enforces it:
		// wait (with dry runs, which pass through admission but store nothing) until it
		// rejects the user who may not create pods.
		noPods := impersonating("no-pods")
		Eventually(func() error {
			return noPods.Create(ctx, newJob(ns, "probe", "@hourly"), client.DryRunAll)
		}, "30s", "200ms").Should(MatchError(ContainSubstring("create pods")))
	})

	It("rejects a user who may create LockedCronJobs but not pods, naming the permission", func() {
		err := impersonating("no-pods").Create(ctx, newJob(ns, "no-pods", "@hourly"))
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("user no-pods may not create pods in namespace " + ns))
		Expect(err.Error()).To(ContainSubstring("missing permission: create pods"))
	})

	It("accepts a user who may create pods and get the referenced Secret, and checks each spec change", func() {
		both := impersonating("both")
		job := newJob(ns, "both", "@hourly")
		Expect(both.Create(ctx, job)).To(Succeed())

		// Pointing the job at a Secret the user may not read is a spec change: rejected.
		var got v1alpha1.LockedCronJob
		Expect(both.Get(ctx, client.ObjectKeyFromObject(job), &got)).To(Succeed())
		got.Spec.Lock.Redis.SecretRef.Name = "other"
		err := both.Update(ctx, &got)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("may not get Secret " + ns + "/other"))

		// A change that leaves spec alone (a label) is not checked: the garbage
		// collector and other controllers update metadata without pods/create.
		Expect(impersonating("no-pods").Patch(ctx, job, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed())
	})

	It("checks a run request like a spec change: it makes a pod from the template", func() {
		both := impersonating("both")
		job := newJob(ns, "requests", "@hourly")
		Expect(both.Create(ctx, job)).To(Succeed())
		request := func(c client.Client, annotations string) error {
			return c.Patch(ctx, job, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{`+annotations+`}}}`)))
		}
		noPods := impersonating("no-pods")
		// A qualifier set while no request is there is the next request's.
		err := request(noPods, `"`+v1alpha1.AnnotationRunOccurrence+`":"2026-11-30T02:00:00Z"`)
		Expect(err).To(HaveOccurred(), "a user who may not create pods chose the next request's occurrence")
		err = request(noPods, `"`+v1alpha1.AnnotationRunRequest+`":"fix-1"`)
		Expect(err).To(HaveOccurred(), "a user who may not create pods requested a run (a pod)")
		Expect(err.Error()).To(ContainSubstring("user no-pods may not create pods in namespace " + ns))
		Expect(err.Error()).To(ContainSubstring("run request"))

		Expect(request(both, `"`+v1alpha1.AnnotationRunRequest+`":"fix-2"`)).To(Succeed())
		// The request's qualifiers are part of it.
		err = request(noPods, `"`+v1alpha1.AnnotationRunContention+`":"`+v1alpha1.ManualContentionFailFast+`"`)
		Expect(err).To(HaveOccurred(), "a user who may not create pods changed a pending request")
		// Removing a qualifier of a request not yet handled changes what it runs (an
		// occurrence again, unless it succeeded, becomes a run of its own; FailFast becomes
		// Wait): checked (helper-101: it was not).
		Expect(request(both, `"`+v1alpha1.AnnotationRunOccurrence+`":"2026-11-30T02:00:00Z"`)).To(Succeed())
		Expect(request(both, `"`+v1alpha1.AnnotationRunContention+`":"`+v1alpha1.ManualContentionFailFast+`"`)).To(Succeed())
		for _, q := range []string{v1alpha1.AnnotationRunOccurrence, v1alpha1.AnnotationRunContention} {
			err = request(noPods, `"`+q+`":null`)
			Expect(err).To(HaveOccurred(), "a user who may not create pods removed %s from a pending request", q)
			Expect(err.Error()).To(ContainSubstring("user no-pods may not create pods in namespace " + ns))
		}
		// Once the controller has handled the request, its qualifiers change nothing:
		// removing one (a clean-up) is not checked.
		var handled v1alpha1.LockedCronJob
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), &handled)).To(Succeed())
		handled.Status.LastRunRequest = &v1alpha1.RunRequest{ID: "fix-2", Contention: v1alpha1.ManualContentionFailFast, HandledAt: metav1.Now()}
		Expect(k8sClient.Status().Update(ctx, &handled)).To(Succeed())
		Expect(request(noPods, `"`+v1alpha1.AnnotationRunContention+`":null`)).To(Succeed())
		// Removing the request, or leaving it as it is, makes no pod: not checked; nor is
		// removing a qualifier once no request is there.
		Expect(request(noPods, `"team":"a"`)).To(Succeed())
		Expect(request(noPods, `"`+v1alpha1.AnnotationRunRequest+`":null`)).To(Succeed())
		Expect(request(noPods, `"`+v1alpha1.AnnotationRunOccurrence+`":null`)).To(Succeed())
	})

	It("rejects a user who may not list the workloads a rollout guard names, naming the kind", func() {
		// The job's status says whether each exists and rolls out: read with the
		// operator's rights.
		guarded := func(name string, kinds ...v1alpha1.WorkloadKind) *v1alpha1.LockedCronJob {
			j := newJob(ns, name, "@hourly")
			j.Spec.Blackout = &v1alpha1.BlackoutSpec{}
			for _, k := range kinds {
				j.Spec.Blackout.Rollouts = append(j.Spec.Blackout.Rollouts, v1alpha1.RolloutRef{Kind: k, Name: "api"})
			}
			return j
		}
		err := impersonating("both").Create(ctx, guarded("no-list", v1alpha1.KindDeployment))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("user both may not list the Deployments of namespace " + ns + " (missing permission: list deployments)"))
		watcher := impersonating("watcher")
		Expect(watcher.Create(ctx, guarded("guarded", v1alpha1.KindDeployment))).To(Succeed())
		err = watcher.Create(ctx, guarded("also-statefulsets", v1alpha1.KindDeployment, v1alpha1.KindStatefulSet))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("(missing permission: list statefulsets)"))
	})

	It("rejects a user who cannot get the referenced Secret, naming it", func() {
		err := impersonating("no-secret").Create(ctx, newJob(ns, "no-secret", "@hourly"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("user no-secret may not get Secret " + ns + "/redis"))
		Expect(err.Error()).To(ContainSubstring("missing permission: get secrets/redis"))
		Expect(err.Error()).NotTo(ContainSubstring("create pods"))
	})
})
