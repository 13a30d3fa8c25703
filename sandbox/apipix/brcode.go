package apipix

import "fmt"

// The charge's Pix Copia e Cola: a dynamic BR Code, the EMV QR Code
// (merchant-presented mode) as the Central Bank's Manual de Padrões para
// Iniciação do Pix profiles it, so that an application rendering the
// sandbox's codes, or checking them, sees what a PSP's look like. Each field
// is ID (two digits), length (two digits) and value; the payer's app reads
// the charge from the location in field 26, so the amount is not repeated
// (the specification's own examples of dynamic codes leave field 54 out).
// The code ends with its CRC (field 63): CRC-16/CCITT-FALSE over everything
// before the CRC's four hex digits, "6304" included.

const (
	// brCodeGUI is the Pix arrangement's identifier in field 26.
	brCodeGUI = "br.gov.bcb.pix"
	// The receiver's name (field 59, at most 25 characters) and city
	// (field 60, at most 15), in the unaccented upper case PSPs write.
	brCodeMerchantName = "RETRYSAFE SANDBOX"
	brCodeMerchantCity = "SAO PAULO"
)

// brCode is the dynamic BR Code of a charge whose payload is at location
// (a URL without its scheme, as API Pix writes it).
func brCode(location string) string {
	code := emv("00", "01") + // payload format indicator
		emv("01", "12") + // point of initiation: dynamic, for one payment
		emv("26", emv("00", brCodeGUI)+emv("25", location)) + // merchant account information
		emv("52", "0000") + // merchant category code: none
		emv("53", "986") + // transaction currency: BRL (ISO 4217)
		emv("58", "BR") +
		emv("59", brCodeMerchantName) +
		emv("60", brCodeMerchantCity) +
		emv("62", emv("05", "***")) + // reference label: the txid is in the payload
		"6304"
	return fmt.Sprintf("%s%04X", code, crc16CCITTFalse(code))
}

// emv is one field: ID, length and value. Lengths count bytes; every
// value here is ASCII, where bytes and characters agree. A value over 99
// cannot be written: the sandbox's own locations are far shorter, so one
// that is not is a bug in the sandbox.
func emv(id, value string) string {
	if len(value) > 99 {
		panic(fmt.Sprintf("apipix: BR Code field %s is %d long (at most 99)", id, len(value)))
	}
	return fmt.Sprintf("%s%02d%s", id, len(value), value)
}

// crc16CCITTFalse is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value
// 0xFFFF, neither input nor output reflected, no final XOR), the BR Code's
// field 63. Bit by bit: a code is a few hundred bytes, made once per
// charge, and the loop is checked against the specification's published
// codes (TestBRCodeCRCOfTheSpecificationsExamples) where a table would be
// one more thing to check.
func crc16CCITTFalse(s string) uint16 {
	crc := uint16(0xFFFF)
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
