declare module 'spdx-expression-parse' {
  export type LicenseNode = { license: string; plus?: true; exception?: string };
  export type ConjunctionNode = { left: ExpressionNode; conjunction: 'and' | 'or'; right: ExpressionNode };
  export type ExpressionNode = LicenseNode | ConjunctionNode;
  export default function parse(expression: string): ExpressionNode;
}
