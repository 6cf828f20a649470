package io.breakerd.client;

/** {@link Classifier#standard()}: one shared instance (the guards use it on every call). */
final class StandardClassifier implements Classifier<Object> {
  static final StandardClassifier INSTANCE = new StandardClassifier();

  private StandardClassifier() {}

  @Override
  public Outcome onResult(Object result) {
    return Outcome.success();
  }

  @Override
  public Outcome onError(Throwable error) {
    return Outcome.fromThrowable(error);
  }
}
