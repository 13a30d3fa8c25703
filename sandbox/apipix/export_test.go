package apipix

// For the external tests: the BR Code and its CRC.
var (
	BRCode = brCode
	CRC16  = crc16CCITTFalse
)
