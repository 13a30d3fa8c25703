package apipix_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pixspec"
	"github.com/retrysafe/retrysafe/sandbox/apipix"
)

// emvField is one field of a BR Code.
type emvField struct{ id, value string }

// parseEMV splits s into its fields (ID, two-digit length, value), refusing
// anything left over or a length past the end: the reading an app scanning
// the code does, written here independently of the sandbox's writer.
func parseEMV(s string) ([]emvField, error) {
	var out []emvField
	for len(s) > 0 {
		if len(s) < 4 {
			return nil, fmt.Errorf("%q: a field's ID and length are 4 digits", s)
		}
		n, err := strconv.Atoi(s[2:4])
		if err != nil || !isDigits(s[:2]) || !isDigits(s[2:4]) {
			return nil, fmt.Errorf("%q: ID and length must be digits", s[:4])
		}
		if len(s) < 4+n {
			return nil, fmt.Errorf("field %s: length %d past the end (%d left)", s[:2], n, len(s)-4)
		}
		out = append(out, emvField{s[:2], s[4 : 4+n]})
		s = s[4+n:]
	}
	return out, nil
}

func isDigits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

// crcOK reports whether code's last four characters are the CRC of
// everything before them.
func crcOK(code string) bool {
	return len(code) >= 4 && strings.EqualFold(code[len(code)-4:], fmt.Sprintf("%04X", apipix.CRC16(code[:len(code)-4])))
}

// checkCRC checks that code ends in field 63 holding the CRC of
// everything before its four digits, and returns its fields.
func checkCRC(t *testing.T, code string) []emvField {
	t.Helper()
	fields, err := parseEMV(code)
	if err != nil {
		t.Fatalf("%s: %v", code, err)
	}
	last := fields[len(fields)-1]
	if last.id != "63" || len(last.value) != 4 {
		t.Fatalf("%s: the last field is %+v, want 63 with four hex digits", code, last)
	}
	if !crcOK(code) {
		t.Fatalf("%s: CRC %s, computed %04X", code, last.value, apipix.CRC16(code[:len(code)-4]))
	}
	return fields
}

// The Central Bank's specification publishes Pix Copia e Cola codes in its
// examples (written by the Central Bank, not here): each one's CRC is what
// crc16CCITTFalse computes, and a code with one character changed is not.
func TestBRCodeCRCOfTheSpecificationsExamples(t *testing.T) {
	t.Parallel()
	raw, err := pixspec.ReadFile()
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)pixCopiaECola:[ \t]*"?(0002[^"\n]*?)"?[ \t]*$`).FindAllSubmatch(raw, -1)
	// Release 2.9.0 has three; a release with none would leave this test
	// checking nothing.
	if len(codes) != 3 {
		t.Fatalf("%d pixCopiaECola examples in the specification, want 3", len(codes))
	}
	for _, m := range codes {
		code := string(m[1])
		checkCRC(t, code)
		bad := []byte(code)
		bad[len(bad)/2] ^= 1
		if crcOK(string(bad)) {
			t.Fatalf("a changed code keeps its CRC: %s", bad)
		}
	}
}

// checkDynamic checks that code is a dynamic Pix BR Code pointing at
// location, as the Manual de Padrões para Iniciação do Pix lays it out.
func checkDynamic(t *testing.T, code, location string) {
	t.Helper()
	fields := checkCRC(t, code)
	if len(code) > 512 {
		t.Fatalf("%d long: an EMV QR code holds at most 512", len(code))
	}
	var ids []string
	byID := map[string]string{}
	for _, f := range fields {
		ids = append(ids, f.id)
		byID[f.id] = f.value
	}
	if want := []string{"00", "01", "26", "52", "53", "58", "59", "60", "62", "63"}; !slices.Equal(ids, want) {
		t.Fatalf("fields %v, want %v", ids, want)
	}
	for id, want := range map[string]string{"00": "01", "01": "12", "52": "0000", "53": "986", "58": "BR"} {
		if byID[id] != want {
			t.Errorf("field %s = %q, want %q", id, byID[id], want)
		}
	}
	if n, c := len(byID["59"]), len(byID["60"]); n == 0 || n > 25 || c == 0 || c > 15 {
		t.Errorf("merchant name %q (1 to 25) or city %q (1 to 15)", byID["59"], byID["60"])
	}
	mai, err := parseEMV(byID["26"])
	if err != nil || !slices.Equal(mai, []emvField{{"00", "br.gov.bcb.pix"}, {"25", location}}) {
		t.Fatalf("merchant account information %q: %+v %v, want the GUI and %q", byID["26"], mai, err, location)
	}
	add, err := parseEMV(byID["62"])
	if err != nil || !slices.Equal(add, []emvField{{"05", "***"}}) {
		t.Fatalf("additional data %q: %+v %v", byID["62"], add, err)
	}
}

// A charge's pixCopiaECola, as PUT /cob/{txid} answers it, is a dynamic BR
// Code at the charge's location.
func TestBRCodeOfACharge(t *testing.T) {
	t.Parallel()
	psp, _ := apipix.New(apipix.Config{})
	srv := httptest.NewServer(psp.Handler())
	defer srv.Close()
	_, tok := token(t, srv.URL, apipix.DefaultClientID, apipix.DefaultClientSecret)
	c := &client{t: t, base: srv.URL + "/api", tr: &pixspec.Transport{Spec: loadSpec(t)}, tok: tok}
	ex := c.do("PUT", "/cob/"+txidA, cobBody("180.00"))
	var got apipix.Cob
	if err := json.Unmarshal(ex.body, &got); err != nil || ex.status != 201 {
		t.Fatalf("PUT /cob: %d %s %v", ex.status, ex.body, err)
	}
	if got.Location == "" || got.PixCopiaECola == "" {
		t.Fatalf("no location or code: %s", ex.body)
	}
	checkDynamic(t, got.PixCopiaECola, got.Location)
}

func FuzzBRCode(f *testing.F) {
	f.Add("pix.sandbox.retrysafe.local/qr/v2/00000000000000000000000000000001")
	f.Add("pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd441")
	f.Add("x")
	f.Fuzz(func(t *testing.T, location string) {
		// A location is a URL without its scheme: printable ASCII, and at
		// most 77 long for field 26 to stay within 99.
		if location == "" || len(location) > 77 || strings.IndexFunc(location, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
			t.Skip()
		}
		checkDynamic(t, apipix.BRCode(location), location)
	})
}

// pix-utils (an independent BR Code reader, Node.js; scripts/pix-utils.sh
// installs it) reads the sandbox's codes as dynamic Pix codes at their
// locations, with the sandbox's receiver, and refuses one whose CRC is
// off by one digit: a check that can fail.
func TestBRCodeReadByPixUtils(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "pixutils")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "pix-utils")); err != nil {
		t.Fatalf("pix-utils is missing: run scripts/pix-utils.sh: %v", err)
	}
	locations := []string{
		"pix.sandbox.retrysafe.local/qr/v2/00000000000000000000000000000001",
		"pix.sandbox.retrysafe.local/qr/v2/000000000000000000000000000f4240",
		"pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd441",
		"psp.example.com.br/pix/v2/cobv/" + strings.Repeat("a", 46), // 77: field 26 at 99
	}
	var in strings.Builder
	for _, loc := range locations {
		in.WriteString(apipix.BRCode(loc) + "\n")
	}
	// The first code with its CRC's last digit changed.
	good := apipix.BRCode(locations[0])
	bad := good[:len(good)-1] + "0"
	if bad == good {
		bad = good[:len(good)-1] + "1"
	}
	in.WriteString(bad + "\n")

	cmd := exec.Command("node", "check.js")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node check.js: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(locations)+1 {
		t.Fatalf("%d answers for %d codes:\n%s", len(lines), len(locations)+1, out)
	}
	for i, loc := range locations {
		var got struct {
			Error, Type, URL, MerchantName, MerchantCity, TransactionCurrency, CountryCode string
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("%s: %v", lines[i], err)
		}
		want := got
		want.Error, want.Type, want.URL = "", "DYNAMIC", loc
		want.MerchantName, want.MerchantCity, want.TransactionCurrency, want.CountryCode = "RETRYSAFE SANDBOX", "SAO PAULO", "986", "BR"
		if got != want {
			t.Errorf("pix-utils read %s as %s", apipix.BRCode(loc), lines[i])
		}
	}
	if !strings.Contains(lines[len(locations)], `"error"`) {
		t.Errorf("pix-utils took a code whose CRC is off (%s): %s", bad, lines[len(locations)])
	}
}
