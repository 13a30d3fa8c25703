package whatsapp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/whatsapp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	secret  = "app-secret-for-tests"
	verify  = "verify-me"
	phoneA  = "100000000001"
	phoneB  = "100000000002"
	wa      = "5511987654321"
	tenantA = "tenant-a"
	tenantB = "tenant-b"
)

type env struct {
	t    *testing.T
	pool *pgxpool.Pool
	h    http.Handler
}

func newEnv(t *testing.T, mut func(*whatsapp.Config)) *env {
	t.Helper()
	pool, schema := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	if _, err := riverschema.Migrate(context.Background(), pool, schema); err != nil {
		t.Fatal(err)
	}
	q, err := agent.NewInserter(pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	cfg := whatsapp.Config{DB: pool, Queue: q, AppSecret: secret, VerifyToken: verify,
		Tenants: map[string]string{phoneA: tenantA, phoneB: tenantB},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mut != nil {
		mut(&cfg)
	}
	h, err := whatsapp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, pool: pool, h: h}
}

func (e *env) post(body []byte, sig string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, whatsapp.Path, bytes.NewReader(body))
	if sig != "" {
		req.Header.Set(whatsapp.SignatureHeader, sig)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// inbound lists both tenants' stored messages, as agent keeps them.
func (e *env) inbound() []agent.Inbound {
	e.t.Helper()
	var out []agent.Inbound
	for _, tenant := range []string{tenantA, tenantB} {
		ms, err := agent.ListInbound(context.Background(), e.pool, tenant)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ms...)
	}
	return out
}

// ignoredOf lists both tenants' ignored messages, by id within each.
func (e *env) ignoredOf() []agent.Ignored {
	e.t.Helper()
	var out []agent.Ignored
	for _, tenant := range []string{tenantA, tenantB} {
		igs, err := agent.ListIgnored(context.Background(), e.pool, tenant)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, igs...)
	}
	return out
}

// stored counts messages and inbox jobs.
func (e *env) stored() (messages, jobs int) {
	e.t.Helper()
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`,
		agent.KindInbox).Scan(&jobs); err != nil {
		e.t.Fatal(err)
	}
	return len(e.inbound()), jobs
}

func (e *env) ignored() int {
	e.t.Helper()
	return len(e.ignoredOf())
}

func msg(id string) agenttest.TextMessage {
	return agenttest.TextMessage{ID: id, From: wa, Body: "quero pagar", At: time.Unix(1732900000, 0)}
}

func TestVerificationChallenge(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		mode, token string
		want        int
	}{
		{"subscribe", verify, http.StatusOK},
		{"subscribe", "wrong", http.StatusForbidden},
		{"subscribe", "", http.StatusForbidden},
		{"unsubscribe", verify, http.StatusForbidden},
	} {
		q := url.Values{"hub.mode": {tc.mode}, "hub.verify_token": {tc.token}, "hub.challenge": {"1158201444"}}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, whatsapp.Path+"?"+q.Encode(), nil))
		if rec.Code != tc.want {
			t.Errorf("mode %q token %q: %d, want %d", tc.mode, tc.token, rec.Code, tc.want)
		}
		if tc.want == http.StatusOK && rec.Body.String() != "1158201444" {
			t.Errorf("challenge echoed as %q", rec.Body)
		}
	}
}

func TestSignatureRequired(t *testing.T) {
	e := newEnv(t, nil)
	body := agenttest.WebhookPayload(phoneA, msg("wamid.sig"))
	good := agenttest.Sign(secret, body)
	for name, sig := range map[string]string{
		"missing":        "",
		"other secret":   agenttest.Sign("another-secret", body),
		"other body":     agenttest.Sign(secret, append(body, ' ')),
		"no prefix":      strings.TrimPrefix(good, "sha256="),
		"sha1 prefix":    "sha1=" + strings.TrimPrefix(good, "sha256="),
		"not hex":        "sha256=zz" + good[9:],
		"truncated":      good[:len(good)-2],
		"upper and junk": good + "00",
	} {
		if rec := e.post(body, sig); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, rec.Code)
		}
	}
	if m, j := e.stored(); m != 0 || j != 0 {
		t.Fatalf("unsigned deliveries stored %d messages, %d jobs", m, j)
	}
	// Upper-case hex is the same signature.
	if rec := e.post(body, "sha256="+strings.ToUpper(good[7:])); rec.Code != http.StatusOK {
		t.Fatalf("good signature (upper case): %d", rec.Code)
	}
	if m, j := e.stored(); m != 1 || j != 1 {
		t.Fatalf("stored %d messages, %d jobs", m, j)
	}
}

func TestMalformedStoresNothing(t *testing.T) {
	e := newEnv(t, nil)
	for name, body := range map[string]string{
		"not json":      `{"object": "whatsapp_business_account", "entry": [`,
		"wrong types":   `{"object": "whatsapp_business_account", "entry": "x"}`,
		"empty object":  `{}`,
		"array":         `[]`,
		"empty payload": ``,
	} {
		if rec := e.post([]byte(body), agenttest.Sign(secret, []byte(body))); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, rec.Code)
		}
	}
	if m, j := e.stored(); m != 0 || j != 0 || e.ignored() != 0 {
		t.Fatalf("malformed deliveries stored %d messages, %d jobs, %d ignored", m, j, e.ignored())
	}
}

// TestBadMessageDoesNotSinkTheBatch: a delivery of a good message and a
// bad one is answered 200 (anything else makes Meta redeliver both for
// days): the good one is stored and queued, the bad one recorded with its
// reason, once, however often the delivery comes.
func TestBadMessageDoesNotSinkTheBatch(t *testing.T) {
	good := string(agenttest.WebhookPayload(phoneA, msg("wamid.m1"), msg("wamid.m2")))
	for name, body := range map[string]string{
		"no id":        strings.Replace(good, `"id":"wamid.m2"`, `"id":""`, 1),
		"sender":       strings.Replace(good, `"from":"`+wa+`","id":"wamid.m2"`, `"from":"+55 11 98765-4321","id":"wamid.m2"`, 1),
		"empty text":   strings.Replace(good, `"id":"wamid.m2","timestamp":"1732900000","type":"text","text":{"body":"quero pagar"}`, `"id":"wamid.m2","timestamp":"1732900000","type":"text","text":{"body":"  "}`, 1),
		"text not obj": strings.Replace(good, `"id":"wamid.m2","timestamp":"1732900000","type":"text","text":{"body":"quero pagar"}`, `"id":"wamid.m2","timestamp":"1732900000","type":"text","text":"quero pagar"`, 1),
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			if body == good {
				t.Fatalf("%s: replacement did not apply", name)
			}
			e := newEnv(t, nil)
			for range 2 {
				if rec := e.post([]byte(body), agenttest.Sign(secret, []byte(body))); rec.Code != http.StatusOK {
					t.Fatalf("%d, want 200", rec.Code)
				}
			}
			if m, j := e.stored(); m != 1 || j != 1 || e.ignored() != 1 {
				t.Fatalf("stored %d messages, %d jobs, %d ignored; want 1, 1, 1", m, j, e.ignored())
			}
		})
	}
}

func TestIgnoredEventsAnswer200(t *testing.T) {
	e := newEnv(t, nil)
	image := strings.Replace(string(agenttest.WebhookPayload(phoneA, msg("wamid.img"))), `"type":"text"`, `"type":"image"`, 1)
	for name, body := range map[string][]byte{
		"status":         agenttest.StatusPayload(phoneA, "wamid.out"),
		"unknown number": agenttest.WebhookPayload("999999999999", msg("wamid.x")),
		"image":          []byte(image),
		"other field":    []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"account_update","value":{}}]}]}`),
	} {
		if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusOK {
			t.Errorf("%s: %d, want 200", name, rec.Code)
		}
	}
	if m, j := e.stored(); m != 0 || j != 0 || e.ignored() != 1 {
		t.Fatalf("ignored events stored %d messages, %d jobs, %d ignored records (want the image's only)", m, j, e.ignored())
	}
}

// TestDuplicateDeliveries: one delivery of two messages, sent twenty times
// at once and then again: two messages, two jobs, every answer 200. The
// same message id under another tenant is another message.
func TestDuplicateDeliveries(t *testing.T) {
	e := newEnv(t, nil)
	body := agenttest.WebhookPayload(phoneA, msg("wamid.d1"), msg("wamid.d2"))
	sig := agenttest.Sign(secret, body)
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = e.post(body, sig).Code }()
	}
	wg.Wait()
	codes = append(codes, e.post(body, sig).Code)
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("delivery %d: %d", i, c)
		}
	}
	if m, j := e.stored(); m != 2 || j != 2 {
		t.Fatalf("stored %d messages, %d jobs; want 2, 2", m, j)
	}
	other := agenttest.WebhookPayload(phoneB, msg("wamid.d1"))
	if rec := e.post(other, agenttest.Sign(secret, other)); rec.Code != http.StatusOK {
		t.Fatal(rec.Code)
	}
	var tenants []string
	var d2 *agent.Inbound
	for _, m := range e.inbound() {
		if m.MessageID == "wamid.d1" {
			tenants = append(tenants, m.Tenant)
		}
		if m.Tenant == tenantA && m.MessageID == "wamid.d2" {
			d2 = &m
		}
	}
	if len(tenants) != 2 || tenants[0] != tenantA || tenants[1] != tenantB {
		t.Fatalf("tenants of wamid.d1: %v", tenants)
	}
	if d2 == nil || d2.ConversationID != wa || d2.Body != "quero pagar" || !d2.SentAt.Equal(time.Unix(1732900000, 0)) {
		t.Fatalf("stored %+v", d2)
	}
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t, func(c *whatsapp.Config) { c.MaxBodyBytes = 64 })
	body := agenttest.WebhookPayload(phoneA, msg("wamid.big"))
	if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d, want 413", rec.Code)
	}
}

// failingQueue refuses every insert: the message row must roll back with it.
type failingQueue struct{}

func (failingQueue) InsertTx(context.Context, pgx.Tx, river.JobArgs, *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	return nil, errors.New("queue down")
}

func TestStoreFailureRollsBack(t *testing.T) {
	e := newEnv(t, func(c *whatsapp.Config) { c.Queue = failingQueue{} })
	body := agenttest.WebhookPayload(phoneA, msg("wamid.fail"))
	if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusInternalServerError {
		t.Fatalf("%d, want 500 (the provider redelivers)", rec.Code)
	}
	if m, _ := e.stored(); m != 0 {
		t.Fatalf("the message was stored without its job")
	}
}

func TestConfigValidation(t *testing.T) {
	pool := pgtest.Pool(t, nil)
	base := whatsapp.Config{DB: pool, Queue: failingQueue{}, AppSecret: "s", VerifyToken: "v", Tenants: map[string]string{"1": "t"}}
	for name, mut := range map[string]func(*whatsapp.Config){
		"no db":      func(c *whatsapp.Config) { c.DB = nil },
		"no queue":   func(c *whatsapp.Config) { c.Queue = nil },
		"no secret":  func(c *whatsapp.Config) { c.AppSecret = "" },
		"no verify":  func(c *whatsapp.Config) { c.VerifyToken = "" },
		"no tenants": func(c *whatsapp.Config) { c.Tenants = nil },
		"empty map":  func(c *whatsapp.Config) { c.Tenants = map[string]string{"1": ""} },
	} {
		c := base
		mut(&c)
		if _, err := whatsapp.New(c); !errors.Is(err, whatsapp.ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
	if _, err := whatsapp.New(base); err != nil {
		t.Fatal(err)
	}
}

func TestParseTenants(t *testing.T) {
	got, err := whatsapp.ParseTenants(" 1001=acme , 1002 = beta,")
	if err != nil || len(got) != 2 || got["1001"] != "acme" || got["1002"] != "beta" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", " , ", "1001", "=acme", "1001=", "1001=a,1001=b"} {
		if _, err := whatsapp.ParseTenants(bad); !errors.Is(err, whatsapp.ErrConfig) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type storedMsg struct {
	id, conversation, body, kind, waID, userID, groupID string
}

func (e *env) messages() map[string]storedMsg {
	e.t.Helper()
	out := map[string]storedMsg{}
	for _, m := range e.inbound() {
		out[m.MessageID] = storedMsg{id: m.MessageID, conversation: m.ConversationID, body: m.Body, kind: m.Kind,
			waID: m.SenderWaID, userID: m.SenderUserID, groupID: m.GroupID}
	}
	return out
}

// TestBatchWithBSUIDTextAndButton is the case: a username user
// (business-scoped user id, no phone number), an ordinary text and an
// interactive button reply in one delivery, as Meta documents it. All
// three are stored and queued once; the delivery again stores nothing.
func TestBatchWithBSUIDTextAndButton(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := readTestdata(t, "batch_bsuid_text_button.json")
	for i := range 3 {
		if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusOK {
			t.Fatalf("delivery %d: %d %s", i, rec.Code, rec.Body)
		}
		if m, j := e.stored(); m != 3 || j != 3 {
			t.Fatalf("after delivery %d: %d messages, %d inbox jobs; want 3 and 3", i, m, j)
		}
	}
	got := e.messages()
	bsuid := got["wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA="]
	if bsuid.conversation != "BR.13491208655302741918" || bsuid.userID != "BR.13491208655302741918" || bsuid.waID != "" || bsuid.body != "Quero pagar a fatura" {
		t.Errorf("BSUID message stored as %+v", bsuid)
	}
	text := got["wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFDNBMEI1QzZEN0U4RjlBMEIxQzJEAA=="]
	if text.conversation != wa || text.waID != wa || text.userID != "BR.1502576394655843" || text.kind != "text" {
		t.Errorf("text message stored as %+v", text)
	}
	button := got["wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFDNBOUM4RDdFNkY1QTRCM0MyRDFFAA=="]
	if button.body != "Pagar agora" || button.kind != "interactive.button_reply" || button.conversation != wa {
		t.Errorf("button reply stored as %+v", button)
	}
	if n := e.ignored(); n != 0 {
		t.Errorf("%d ignored records", n)
	}
}

// TestEveryMessageShape: what a customer can send either reaches the agent
// (template button, list reply, captions) or is recorded as ignored with
// its type; the delivery is answered 200 either way.
func TestEveryMessageShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := readTestdata(t, "shapes.json")
	for range 2 {
		if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	want := map[string][2]string{
		"wamid.shape.button":   {"button", "Pagar agora"},
		"wamid.shape.list":     {"interactive.list_reply", "Fatura 2024-0042\nR$ 180,00"},
		"wamid.shape.image":    {"image", "Comprovante do Pix da fatura NF-123"},
		"wamid.shape.document": {"document", "Boleto"},
		"wamid.shape.video":    {"video", "Como pago?"},
	}
	got := e.messages()
	if len(got) != len(want) {
		t.Errorf("%d messages stored, want %d: %v", len(got), len(want), got)
	}
	for id, w := range want {
		if m := got[id]; m.kind != w[0] || m.body != w[1] {
			t.Errorf("%s stored as %+v, want kind %q body %q", id, m, w[0], w[1])
		}
	}
	var ignored []string
	for _, ig := range e.ignoredOf() {
		ignored = append(ignored, ig.MessageID+"="+ig.Type)
	}
	wantIgnored := []string{"wamid.shape.audio=audio", "wamid.shape.image_nocaption=image", "wamid.shape.reaction=reaction", "wamid.shape.unsupported=unsupported"}
	if strings.Join(ignored, ",") != strings.Join(wantIgnored, ",") {
		t.Errorf("ignored %v, want %v", ignored, wantIgnored)
	}
}

// TestGroupMessageKeptApart: a group message is its group's conversation,
// never the participant's one-to-one thread.
func TestGroupMessageKeptApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := readTestdata(t, "group.json")
	if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	m := e.messages()["wamid.shape.group"]
	const group = "Y2FwaV9ncm91cDoxNzA1NTU1MDEzOToxMjAzNjM0MDQ2OTQyMzM0MjIZD"
	if m.conversation != "group:"+group || m.groupID != group || m.waID != wa {
		t.Fatalf("group message stored as %+v", m)
	}
}

// TestStatusesOfUnknownMessages: statuses as Meta documents them, about
// messages no reply of ours sent: 200, nothing stored or queued.
func TestStatusesOfUnknownMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := readTestdata(t, "statuses.json")
	if rec := e.post(body, agenttest.Sign(secret, body)); rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var jobs int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if m, _ := e.stored(); m != 0 || jobs != 0 || e.ignored() != 0 {
		t.Fatalf("stored %d messages, %d jobs, %d ignored", m, jobs, e.ignored())
	}
}
