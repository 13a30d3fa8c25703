-- An amendment of an intent whose action already completed, for a tool that
-- moves money, would act again under the new key (a second charge): it is
-- refused unless an operator overrides it (intent.AmendParams.
-- OverrideCompleted). The revision records that it did, and who: overrode
-- is the status of the action under the old key that the amendment went
-- past ('completed'), NULL for an ordinary amendment.
ALTER TABLE intent_revisions ADD COLUMN overrode text;
ALTER TABLE intent_revisions ADD CONSTRAINT intent_revisions_override_by
    CHECK (overrode IS NULL OR amended_by <> '');
