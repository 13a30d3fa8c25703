package ledger

// statements names the ledger's statements by their text.
var statements = map[string]string{
	groupPlans:               "groupPlans",
	intentDurable:            "intentDurable",
	intentFreeze:             "intentFreeze",
	intentFreezeMany:         "intentFreezeMany",
	intentGetMany:            "intentGetMany",
	intentGet:                "intentGet",
	intentGetByKey:           "intentGetByKey",
	intentGetByKeyMany:       "intentGetByKeyMany",
	intentLock:               "intentLock",
	intentAmend:              "intentAmend",
	intentRefsByKeyPrefix:    "intentRefsByKeyPrefix",
	intentRevisionInsert:     "intentRevisionInsert",
	intentRevisionList:       "intentRevisionList",
	actionClaim:              "actionClaim",
	actionGetForIntent:       "actionGetForIntent",
	intentActionClaimNewMany: "intentActionClaimNewMany",
	actionClaimMany:          "actionClaimMany",
	actionGetForIntentMany:   "actionGetForIntentMany",
	intentActionGetMany:      "intentActionGetMany",
	intentActionGet:          "intentActionGet",
	actionGet:                "actionGet",
	actionList:               "actionList",
	actionComplete:           "actionComplete",
	actionCompleteAsync:      "actionCompleteAsync",
	actionCompleteMany:       "actionCompleteMany",
	actionCompleteManyAsync:  "actionCompleteManyAsync",
	actionRelease:            "actionRelease",
	actionHeartbeat:          "actionHeartbeat",
	actionTakeover:           "actionTakeover",
	actionRetake:             "actionRetake",
	actionReconcileTake:      "actionReconcileTake",
	actionResolve:            "actionResolve",
	actionTombstoneInsert:    "actionTombstoneInsert",
	actionStatusGet:          "actionStatusGet",
	actionTombstoneDelete:    "actionTombstoneDelete",
	actionReviewCount:        "actionReviewCount",
	actionListReview:         "actionListReview",
	intentActionListByRef:    "intentActionListByRef",
	actionListByReference:    "actionListByReference",
	actionCountRecent:        "actionCountRecent",
	actionRefByPayment:       "actionRefByPayment",
	actionPurgeSize:          "actionPurgeSize",
	actionPurge:              "actionPurge",
	actionLeaseExpireAll:     "actionLeaseExpireAll",
	actionInsertCompleted:    "actionInsertCompleted",
	actionListFiltered:       "actionListFiltered",
	actionCountFiltered:      "actionCountFiltered",
	intentListWithStatus:     "intentListWithStatus",
}

// Name returns the name of the ledger's statement whose text is sql (its
// constant's, "actionClaim"), or "" for any other text: for tracers and
// tests that tell statements apart by what reached the server, without the
// text leaving the package.
func Name(sql string) string { return statements[sql] }
