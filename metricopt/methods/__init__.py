"""The method families, each in a folder holding its problem(s), algorithms and estimator(s):

* :mod:`.lmnn`: LMNN and its extensions (JMLR 2009);
* :mod:`.nca`: NCA (NIPS 2004) and MLCC (NIPS 2006);
* :mod:`.pairs`: MMC (NIPS 2002) and POLA (ICML 2004);
* :mod:`.baselines`: PCA, whitening, LDA, RCA;
* :mod:`.gerrymander`: neighbourhood gerrymandering (NIPS 2014);
* :mod:`.local`: local distance functions (Ramanan & Baker, IEEE PAMI 2011).

They build on the core (:mod:`metricopt.problems`, :mod:`metricopt.backends`, :mod:`metricopt.certify`,
:mod:`metricopt.solving`), which never imports them. The certificates are the core's, chosen by a problem's
shape (triplet hinge, pair budget, threshold, latent set), not by its family.
"""
