"""AIToolbox's ``aitoolbox.nlp`` package: text helpers, vocabulary, NLP metrics and packages."""
