"""Each table's change rate, learned from its own history: counted per 15 minutes of source time by the
hourly maintenance (:mod:`.counts`), judged against the same hours of earlier days (:mod:`.judge`), and
read without Spark for ``status`` (:mod:`.read`)."""
